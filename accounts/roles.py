"""The roles of the contract, as Django groups. viewer < operator < admin: each includes the
ones below it. `service` stands apart: it may use the embedded registry's naming API (Nacos
clients registering themselves) and nothing else, so it is in no rank of that chain."""

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
SERVICE = "service"
ALL_ROLES = (*ROLES, SERVICE)
_RANK = {role: rank for rank, role in enumerate(ROLES, start=1)}


def role_of(user) -> str | None:
    """The highest role the user holds, or None."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached: str | None | bool = getattr(user, "_graylane_role", False)
    if cached is not False:
        return cached  # type: ignore[return-value]  # a role name or None, once set
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    user._graylane_role = role
    return role


def has_role(user, required: str) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[required]


def may_use_registry(user) -> bool:
    """The embedded registry's naming API: the `service` role, or admin."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or user.groups.filter(name__in=(SERVICE, ADMIN)).exists()
