from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import permissions

if TYPE_CHECKING:  # DRF loads this class while rest_framework.views is still importing
    from rest_framework.request import Request
    from rest_framework.views import APIView

from accounts.roles import ADMIN, OPERATOR, VIEWER, has_role


class RolePermission(permissions.BasePermission):
    """Reads need `viewer`; writes need the view's `write_role` (default `operator`).

    A view may also set `read_role` (for example `admin` for gateway secrets)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        if request.method in permissions.SAFE_METHODS:
            required = getattr(view, "read_role", VIEWER)
        else:
            required = getattr(view, "write_role", OPERATOR)
        return has_role(user, required)


__all__ = ["RolePermission", "VIEWER", "OPERATOR", "ADMIN"]
