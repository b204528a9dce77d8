"""The roles of the contract, as Django groups. viewer < operator < admin: each includes the
ones below it. `service` stands apart: it may use the embedded registry's naming API (Nacos
clients registering themselves) and nothing else, so it is in no rank of that chain."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # models import this module, before the auth models can load
    from accounts.models import AnyUser

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
SERVICE = "service"
ALL_ROLES = (*ROLES, SERVICE)
_RANK = {role: rank for rank, role in enumerate(ROLES, start=1)}
# The role of a user, kept on the user object once looked up (one query per request).
_CACHED_ROLE = "_graylane_role"


def role_of(user: AnyUser | None) -> str | None:
    """The highest role the user holds, or None."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached: str | None | bool = getattr(user, _CACHED_ROLE, False)
    if cached is not False:
        return cached  # type: ignore[return-value]  # a role name or None, once set
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    setattr(user, _CACHED_ROLE, role)
    return role


def has_role(user: AnyUser | None, required: str) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[required]


def may_use_registry(user: AnyUser | None) -> bool:
    """The embedded registry's naming API: the `service` role, or admin."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name__in=(SERVICE, ADMIN)).exists()
