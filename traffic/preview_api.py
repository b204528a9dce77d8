"""`POST /api/v1/policy/preview/`: what a draft of the policy and lanes would do to the
sampled requests of the window, before it is published. Changes nothing."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from policy.proposals import draft_document
from policy.publishing import load_state
from routing_engine import NON_FIELD_ERRORS, PolicyError
from traffic.impact import preview
from traffic.preview_serializers import PreviewRequestSerializer, PreviewSerializer


class PreviewView(APIView):
    # A question about a change, not the change: viewers may ask it.
    write_role = "viewer"

    @extend_schema(request=PreviewRequestSerializer, responses=PreviewSerializer)
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict) or not ({"policy", "lanes"} & set(body)):
            errors = {NON_FIELD_ERRORS: ["Send a draft: `policy`, `lanes` or both."]}
            return Response(errors, status=status.HTTP_400_BAD_REQUEST)
        state = load_state()
        try:
            draft = draft_document(
                state.document, body.get("policy"), body.get("lanes"), request.user.username
            )
        except PolicyError as exc:
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(preview(state, draft))
