from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework import permissions

if TYPE_CHECKING:  # DRF loads this class while rest_framework.views is still importing
    from rest_framework.request import Request
    from rest_framework.views import APIView

from accounts.roles import ADMIN, OPERATOR, VIEWER, has_role, may_use_registry


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


class ServiceWritesPermission(permissions.BasePermission):
    """Reads need `viewer`; writes the fleet's own credentials, a `service` user (or admin),
    as the embedded registry takes them: what instances report about themselves."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return has_role(request.user, VIEWER)
        return may_use_registry(request.user)


__all__ = ["RolePermission", "ServiceWritesPermission", "VIEWER", "OPERATOR", "ADMIN"]
