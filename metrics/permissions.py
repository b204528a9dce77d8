from rest_framework import permissions

from gateways.authentication import GatewayPrincipal


class GatewayOnly(permissions.BasePermission):
    """Gateway tokens only: a user's token (whatever its role) is refused with 403."""

    def has_permission(self, request, view):
        return isinstance(request.user, GatewayPrincipal)
