from rest_framework import permissions

from accounts.roles import ADMIN, OPERATOR, VIEWER, has_role


class RolePermission(permissions.BasePermission):
    """Reads need `viewer`; writes need the view's `write_role` (default `operator`).

    A view may also set `read_role` (for example `admin` for gateway secrets)."""

    def has_permission(self, request, view):
        user = request.user
        if not user or not user.is_authenticated:
            return False
        if request.method in permissions.SAFE_METHODS:
            required = getattr(view, "read_role", VIEWER)
        else:
            required = getattr(view, "write_role", OPERATOR)
        return has_role(user, required)


__all__ = ["RolePermission", "VIEWER", "OPERATOR", "ADMIN"]
