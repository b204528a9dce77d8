from django.http import HttpRequest

from accounts.roles import ADMIN, OPERATOR, has_role, role_of


def navigation(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    return {
        "user_role": role_of(user),
        "can_operate": has_role(user, OPERATOR) if user else False,
        "can_administer": has_role(user, ADMIN) if user else False,
    }
