"""Which services a `service` user is bound to (`issue_token --service`): its instances may
read those services' replay samples, which hold personal data, and no other's."""

from collections.abc import Iterable

from django.contrib.auth.models import User

from accounts.models import AnyUser, ServiceBinding
from accounts.roles import SERVICE


def bind(user: User, services: Iterable[str]) -> None:
    """Bind `user` to exactly `services`."""
    wanted = set(services)
    user.service_bindings.exclude(service__in=wanted).delete()
    held = set(user.service_bindings.values_list("service", flat=True))
    ServiceBinding.objects.bulk_create(
        ServiceBinding(user=user, service=name) for name in sorted(wanted - held)
    )


def is_service_user(user: AnyUser | None) -> bool:
    if not user or not user.is_authenticated or not user.is_active:
        return False
    return user.groups.filter(name=SERVICE).exists()


def may_replay(user: AnyUser | None, service: str) -> bool:
    """A `service` user bound to `service`."""
    if not isinstance(user, User) or not is_service_user(user):
        return False
    return user.service_bindings.filter(service=service).exists()
