"""The three roles of the contract, as Django groups; each includes the ones below it."""

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
_RANK = {role: rank for rank, role in enumerate(ROLES, start=1)}


def role_of(user) -> str | None:
    """The highest role the user holds, or None."""
    if not user or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, "_graylane_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    user._graylane_role = role
    return role


def has_role(user, required: str) -> bool:
    role = role_of(user)
    return role is not None and _RANK[role] >= _RANK[required]
