from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from accounts.roles import has_role


def role_required(role: str):
    """For dashboard views: log in first, then hold at least `role`, else 403."""

    def decorator(view):
        @login_required
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator
