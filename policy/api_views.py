from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from accounts.roles import ADMIN, has_role
from policy import drafts
from policy.change_control import DraftPending, Frozen, set_protected
from policy.documents import policy_of
from policy.freezes import AlreadyOver, create_freeze, end_freeze
from policy.lanes import LaneInUse
from policy.models import Freeze, PolicyDraft, PolicyState, Revision
from policy.proposals import NOT_LANE_FIELDS, NOT_POLICY_FIELDS
from policy.publishing import StaleRevision, load_state
from policy.serializers import (
    DraftDecisionSerializer,
    FreezeSerializer,
    LaneSerializer,
    PolicyDraftDetailSerializer,
    PolicyDraftSerializer,
    PolicySerializer,
    RevisionDetailSerializer,
    RevisionSerializer,
    RollbackSerializer,
    ServiceSerializer,
    ServiceVersionsSerializer,
    SimulateRequestSerializer,
    SimulateResponseSerializer,
)
from policy.services import (
    create_lane,
    delete_lane,
    lane_row,
    lane_rows,
    lift_quarantine,
    rollback_to,
    service_rows,
    set_service_versions,
    update_lane,
    update_policy,
)
from policy.simulation import simulate
from registry_sync.models import Service
from routing_engine import PolicyError


def policy_payload(state: PolicyState) -> dict:
    return {
        "revision": state.revision,
        **policy_of(state.document),
        "updated_at": state.updated_at.isoformat().replace("+00:00", "Z"),
        "updated_by": state.updated_by,
    }


def with_etag(response: Response, state: PolicyState) -> Response:
    response["ETag"] = f'"{state.revision}"'
    return response


def header_if_match(request: Request) -> int | None:
    """The revision an `If-Match` header expects, None when absent or `*`."""
    raw = request.headers.get("If-Match", "").strip()
    if not raw or raw == "*":
        return None
    value = raw.removeprefix("W/").strip('"')
    # isascii: str.isdigit() also holds for digits int() refuses ("²"); a revision is a
    # 64-bit integer, so 18 digits are plenty.
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise ValidationError({"If-Match": [f'Expected "<revision>", got {raw!r}.']})
    return int(value)


def policy_error_response(exc: PolicyError) -> Response:
    return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)


def held_response(exc: Frozen | DraftPending) -> Response:
    """A change refused by a freeze window (409), or kept as a draft (202)."""
    if isinstance(exc, DraftPending):
        body = {"draft": exc.draft.pk, "detail": str(exc)}
        return Response(body, status=status.HTTP_202_ACCEPTED)
    return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)


def freeze_override_of(request: Request) -> str:
    """The body's `freeze_override` reason ("" when none); only an admin may give one."""
    value = request.data.get("freeze_override", "") if isinstance(request.data, dict) else ""
    if value in ("", None):
        return ""
    if not isinstance(value, str) or not value.strip() or len(value) > 500:
        raise ValidationError({"freeze_override": ["A reason of at most 500 characters."]})
    if not has_role(request.user, ADMIN):
        raise PermissionDenied("Only an admin may override a freeze window.")
    return value.strip()


def stale_response(state: PolicyState) -> Response:
    body = {
        "detail": f"Revision {state.revision} was published meanwhile; reload and retry.",
        **policy_payload(state),
    }
    return with_etag(Response(body, status=status.HTTP_412_PRECONDITION_FAILED), state)


class PolicyView(APIView):
    """The gray policy: one per installation. Writes honour `If-Match: "<revision>"`."""

    serializer_class = PolicySerializer

    @extend_schema(responses=PolicySerializer)
    def get(self, request: Request) -> Response:
        state = load_state()
        return with_etag(Response(policy_payload(state)), state)

    @extend_schema(request=PolicySerializer, responses=PolicySerializer)
    def put(self, request: Request) -> Response:
        return self._write(request, partial=False)

    @extend_schema(request=PolicySerializer, responses=PolicySerializer)
    def patch(self, request: Request) -> Response:
        return self._write(request, partial=True)

    def _write(self, request: Request, *, partial: bool) -> Response:
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["Expected a JSON object."]})
        # What a GET returns can be sent back as it is: the read-only fields are not policy.
        data = {k: v for k, v in request.data.items() if k not in NOT_POLICY_FIELDS}
        comment = request.data.get("comment", "")
        if not isinstance(comment, str) or len(comment) > 500:
            raise ValidationError({"comment": ["A string of at most 500 characters."]})
        expected = header_if_match(request)
        if expected is None and isinstance(request.data.get("revision"), int):
            # A document read, edited and sent back carries its revision: honour it like
            # If-Match, so that round trip cannot overwrite a newer revision either.
            expected = request.data["revision"]
        try:
            result = update_policy(
                data,
                partial=partial,
                actor=request.user.username,
                source="api",
                expected_revision=expected,
                comment=comment,
                freeze_override=freeze_override_of(request),
            )
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        return with_etag(Response(policy_payload(result.state)), result.state)


class SimulateView(APIView):
    """Which flag, version and instances a request would get, and which rule matched."""

    @extend_schema(request=SimulateRequestSerializer, responses=SimulateResponseSerializer)
    def post(self, request: Request) -> Response:
        form = SimulateRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        result = simulate(
            load_state(),
            service=data.get("service") or None,
            headers=data.get("headers") or {},
            ip=data.get("ip") or None,
            city=data.get("city") or None,
            user=data.get("user") or None,
            path=data.get("path") or None,
        )
        return Response(result)

    # A read-only question: viewers may ask it.
    write_role = "viewer"


class RevisionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Revision.objects.order_by("-number")
    lookup_field = "number"
    lookup_url_kwarg = "n"
    lookup_value_regex = "[0-9]+"

    def get_serializer_class(self) -> type[BaseSerializer]:
        if self.action == "list":
            return RevisionSerializer
        if self.action == "rollback":
            return RollbackSerializer
        return RevisionDetailSerializer

    def get_queryset(self) -> QuerySet[Revision]:
        load_state()  # a fresh installation has its initial revision from the first read
        if self.action == "list":
            return Revision.objects.order_by("-number").defer("content", "diff")
        return Revision.objects.all()

    @extend_schema(request=RollbackSerializer, responses={201: RevisionDetailSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, n: str | None = None) -> Response:
        target = get_object_or_404(self.get_queryset(), number=n)
        form = RollbackSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            result = rollback_to(
                target,
                actor=request.user.username,
                expected_revision=header_if_match(request),
                comment=form.validated_data.get("comment", ""),
                freeze_override=freeze_override_of(request),
            )
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        except LaneInUse as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        if not result.changed:
            body = {"detail": f"Revision {target.number}'s content is already live."}
            return Response(body, status=status.HTTP_200_OK)
        return Response(
            RevisionDetailSerializer(result.revision).data, status=status.HTTP_201_CREATED
        )


class ServiceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Services as the registries see them, with their effective versions."""

    queryset = Service.objects.select_related("registry").order_by("name")
    serializer_class = ServiceSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        assert page is not None, "the API paginates every list (DEFAULT_PAGINATION_CLASS)"
        return self.get_paginated_response(service_rows(page, load_state().document))

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(service_rows([self.get_object()], load_state().document)[0])

    @extend_schema(request=ServiceVersionsSerializer, responses=ServiceSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        service = self.get_object()
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["Expected a JSON object."]})
        changes = {
            k: v for k, v in request.data.items() if k not in ("protected", "freeze_override")
        }
        protected = request.data.get("protected")
        if "protected" in request.data:
            if not has_role(request.user, ADMIN):
                raise PermissionDenied("Only an admin may protect a service or unprotect it.")
            if not isinstance(protected, bool):
                raise ValidationError({"protected": ["Must be true or false."]})
        try:
            if changes:
                set_service_versions(
                    service.name,
                    changes,
                    actor=request.user.username,
                    source="api",
                    expected_revision=header_if_match(request),
                    freeze_override=freeze_override_of(request),
                )
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        if isinstance(protected, bool):
            set_protected(service, protected, actor=request.user.username, source="api")
        return Response(service_rows([service], load_state().document)[0])


# -- lanes ------------------------------------------------------------------------------------


def _lane_body(request: Request) -> tuple[dict, str, Any]:
    """(the lane's fields, the comment, the name) of a request body."""
    body = request.data
    if not isinstance(body, dict):
        raise ValidationError({"non_field_errors": ["Expected a JSON object."]})
    comment = body.get("comment", "")
    if not isinstance(comment, str) or len(comment) > 500:
        raise ValidationError({"comment": ["A string of at most 500 characters."]})
    fields = {key: value for key, value in body.items() if key not in NOT_LANE_FIELDS}
    return fields, comment, body.get("name")


class LaneListView(GenericAPIView):
    """Lanes (contract "Lanes"): the built-in `gray` (the policy) and the others."""

    serializer_class = LaneSerializer
    # Lanes are no model rows: nothing to filter (and no model for the schema's filters).
    filter_backends: list = []

    @extend_schema(responses=LaneSerializer(many=True))
    def get(self, request: Request) -> Response:
        state = load_state()
        page = self.paginate_queryset(lane_rows(state))
        assert page is not None, "the API paginates every list (DEFAULT_PAGINATION_CLASS)"
        return with_etag(self.get_paginated_response(page), state)

    @extend_schema(request=LaneSerializer, responses={201: LaneSerializer})
    def post(self, request: Request) -> Response:
        data, comment, name = _lane_body(request)
        try:
            result = create_lane(
                name,
                data,
                actor=request.user.username,
                source="api",
                expected_revision=header_if_match(request),
                comment=comment,
                freeze_override=freeze_override_of(request),
            )
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        row = lane_row(result.state, str(name))
        return with_etag(Response(row, status=status.HTTP_201_CREATED), result.state)


class LaneDetailView(APIView):
    """One lane; `gray` is the policy (editing it edits the policy) and cannot be deleted."""

    serializer_class = LaneSerializer

    @extend_schema(responses=LaneSerializer)
    def get(self, request: Request, name: str) -> Response:
        state = load_state()
        row = lane_row(state, name)
        if row is None:
            raise NotFound(f"No lane named {name!r}.")
        return with_etag(Response(row), state)

    @extend_schema(request=LaneSerializer, responses=LaneSerializer)
    def put(self, request: Request, name: str) -> Response:
        return self._write(request, name, partial=False)

    @extend_schema(request=LaneSerializer, responses=LaneSerializer)
    def patch(self, request: Request, name: str) -> Response:
        return self._write(request, name, partial=True)

    def _write(self, request: Request, name: str, *, partial: bool) -> Response:
        data, comment, _ = _lane_body(request)
        try:
            result = update_lane(
                name,
                data,
                partial=partial,
                actor=request.user.username,
                source="api",
                expected_revision=header_if_match(request),
                comment=comment,
                freeze_override=freeze_override_of(request),
            )
        except LookupError:
            raise NotFound(f"No lane named {name!r}.") from None
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        return with_etag(Response(lane_row(result.state, name)), result.state)

    @extend_schema(responses={204: None, 409: None})
    def delete(self, request: Request, name: str) -> Response:
        try:
            result = delete_lane(
                name,
                actor=request.user.username,
                source="api",
                expected_revision=header_if_match(request),
                freeze_override=freeze_override_of(request),
            )
        except LookupError:
            raise NotFound(f"No lane named {name!r}.") from None
        except PolicyError as exc:
            return policy_error_response(exc)
        except StaleRevision as exc:
            return stale_response(exc.state)
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        except LaneInUse as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return with_etag(Response(status=status.HTTP_204_NO_CONTENT), result.state)


class QuarantineView(APIView):
    """`DELETE /api/v1/services/{name}/quarantine/{version}/`: the version gets traffic again."""

    @extend_schema(responses=ServiceSerializer)
    def delete(self, request: Request, name: str, version: str) -> Response:
        service = get_object_or_404(Service, name=name)
        try:
            lift_quarantine(
                name,
                version,
                actor=request.user.username,
                source="api",
                freeze_override=freeze_override_of(request),
            )
        except LookupError as exc:
            raise NotFound(str(exc)) from None
        except (Frozen, DraftPending) as exc:
            return held_response(exc)
        return Response(service_rows([service], load_state().document)[0])


# -- change control ---------------------------------------------------------------------------


class FreezeViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Freeze windows: anyone reads them, admins make and end them."""

    queryset = Freeze.objects.order_by("-starts_at", "-id")
    serializer_class = FreezeSerializer
    write_role = ADMIN

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        form = FreezeSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        freeze = create_freeze(**form.validated_data, actor=request.user.username, source="api")
        return Response(FreezeSerializer(freeze).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: FreezeSerializer, 204: None, 409: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A window not begun is removed (204); one in progress ends now (200)."""
        try:
            ended = end_freeze(self.get_object().pk, actor=request.user.username, source="api")
        except AlreadyOver as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        if ended is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(FreezeSerializer(ended).data)


class PolicyDraftViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Changes of protected services waiting for another operator."""

    queryset = PolicyDraft.objects.order_by("-id")
    filterset_fields = ["state", "author"]

    def get_serializer_class(self) -> type[BaseSerializer]:
        if self.action in ("approve", "reject"):
            return DraftDecisionSerializer
        if self.action == "list":
            return PolicyDraftSerializer
        return PolicyDraftDetailSerializer

    @extend_schema(
        request=DraftDecisionSerializer,
        responses={200: PolicyDraftDetailSerializer, 403: None, 409: None},
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        draft = self.get_object()
        form = DraftDecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            drafts.approve(
                draft.pk,
                actor=request.user.username,
                source="api",
                reason=form.validated_data.get("reason", ""),
                freeze_override=freeze_override_of(request),
            )
        except drafts.NotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        except (drafts.NotPending, Frozen) as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        draft.refresh_from_db()
        return Response(PolicyDraftDetailSerializer(draft).data)

    @extend_schema(
        request=DraftDecisionSerializer, responses={200: PolicyDraftDetailSerializer, 409: None}
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        draft = self.get_object()
        form = DraftDecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            drafts.reject(
                draft.pk,
                actor=request.user.username,
                source="api",
                reason=form.validated_data.get("reason", ""),
            )
        except drafts.NotPending as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        draft.refresh_from_db()
        return Response(PolicyDraftDetailSerializer(draft).data)
