from collections.abc import Callable
from functools import partial

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from releases import bundles, outcomes, services, shadow
from releases.filters import ReleaseFilter
from releases.models import Release, ReleaseBundle
from releases.outcome_serializers import StatsQuerySerializer, StatsSerializer
from releases.serializers import (
    BundleCreateSerializer,
    BundleSerializer,
    ReleaseCreateSerializer,
    ReleaseEventSerializer,
    ReleaseSerializer,
    ReleaseStartSerializer,
)


def _action(
    name: str,
    act: Callable[..., Release | ReleaseBundle] = services.act,
    serializer: type[serializers.ModelSerializer] = ReleaseSerializer,
    what: str = "release",
) -> Callable[..., Response]:
    def run(self: viewsets.GenericViewSet, request: Request, pk: str | None = None) -> Response:
        return _act(self, request, name, act, serializer)

    # The router dispatches to the view method of this name: set before decorating.
    run.__name__ = name
    run.__doc__ = f"`{name}` the {what} (operator); 409 when its state does not allow it."
    schema = extend_schema(request=None, responses={200: serializer, 403: None, 409: None})
    return schema(action(detail=True, methods=["post"], url_path=name, url_name=name)(run))


def _act(
    view: viewsets.GenericViewSet,
    request: Request,
    name: str,
    act: Callable[..., Release | ReleaseBundle],
    serializer: type[serializers.ModelSerializer],
) -> Response:
    target = view.get_object()
    try:
        target = act(target.pk, name, actor=request.user.username, source="api")
    except services.Conflict as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    except services.Forbidden as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
    return Response(serializer(target).data)


class ReleaseViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Progressive releases: steps of gray traffic, analysed each interval."""

    queryset = Release.objects.all()
    serializer_class = ReleaseSerializer
    filterset_class = ReleaseFilter

    @extend_schema(request=ReleaseCreateSerializer, responses={201: ReleaseSerializer})
    def create(self, request: Request) -> Response:
        form = ReleaseCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            release = services.create_release(
                **form.release_fields(), actor=request.user.username, source="api"
            )
        except services.Invalid as exc:
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(ReleaseSerializer(release).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=ReleaseStartSerializer, responses={200: ReleaseSerializer, 400: None, 409: None}
    )
    @action(detail=True, methods=["post"])
    def start(self, request: Request, pk: str | None = None) -> Response:
        """`start` the release now (operator), or with `{"at": "<ISO time>"}` then (state
        `scheduled`); 409 when its state does not allow it."""
        form = ReleaseStartSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        act = partial(services.act, at=form.validated_data.get("at"))
        return _act(self, request, "start", act, ReleaseSerializer)

    pause = _action("pause")
    resume = _action("resume")
    promote = _action("promote")
    approve = _action("approve")
    rollback = _action("rollback")
    abort = _action("abort")

    @extend_schema(responses=ReleaseEventSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The release's timeline, newest first."""
        page = self.paginate_queryset(self.get_object().events.all())
        return self.get_paginated_response(ReleaseEventSerializer(page, many=True).data)

    @extend_schema(parameters=[StatsQuerySerializer], responses=StatsSerializer, filters=False)
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], filterset_class=None)
    def shadow(self, request: Request, pk: str | None = None) -> Response:
        """Shadow traffic's diff: copies of prod requests sent to `to_version`, compared."""
        return Response(shadow.summary(self.get_object()))

    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def stats(self, request: Request) -> Response:
        """How the finished releases ended, per service (a list route: before `{id}/`)."""
        query = StatsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = outcomes.per_service(**query.validated_data)
        return Response({"services": [row.as_dict() for row in found]})


def _bundle_action(name: str) -> Callable[..., Response]:
    return _action(name, bundles.act_bundle, BundleSerializer, "bundle, each release in order")


class ReleaseBundleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Several services released as one, in dependency order."""

    queryset = ReleaseBundle.objects.all()
    serializer_class = BundleSerializer

    @extend_schema(request=BundleCreateSerializer, responses={201: BundleSerializer})
    def create(self, request: Request) -> Response:
        form = BundleCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            bundle = bundles.create_bundle(
                **form.bundle_fields(), actor=request.user.username, source="api"
            )
        except services.Invalid as exc:
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(BundleSerializer(bundle).data, status=status.HTTP_201_CREATED)

    start = _bundle_action("start")
    pause = _bundle_action("pause")
    resume = _bundle_action("resume")
    promote = _bundle_action("promote")
    approve = _bundle_action("approve")
    rollback = _bundle_action("rollback")
    abort = _bundle_action("abort")
