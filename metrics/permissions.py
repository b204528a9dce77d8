from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from gateways.authentication import GatewayPrincipal


class GatewayOnly(permissions.BasePermission):
    """Gateway tokens only: a user's token (whatever its role) is refused with 403."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, GatewayPrincipal)
