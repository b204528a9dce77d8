"""Gateway tokens: `Authorization: Token <key>` like users' tokens, but a gateway can do only
gateway things (read its config, ack it). Users' tokens cannot do those."""

from django.contrib.auth.models import Group, Permission
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, hash_token
from gateways.models import Gateway


class GatewayPrincipal:
    """`request.user` of a request made with a gateway token: authenticated, but not a user
    and in no group, so every role-checked endpoint answers 403."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = id = None

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.username = f"gateway:{gateway.name}"

    def __str__(self) -> str:
        return self.username

    @property
    def groups(self):
        return Group.objects.none()

    @property
    def user_permissions(self):
        return Permission.objects.none()

    def has_perm(self, perm, obj=None) -> bool:
        return False


def token_key(authorization: str) -> str | None:
    """The key of an `Authorization: Token <key>` header value, else None."""
    scheme, _, key = authorization.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "token" or not key or " " in key:
        return None
    return key


class GatewayTokenAuthentication(authentication.TokenAuthentication):
    """DRF authentication for a key that is no user's token (listed after the users' token
    class, which passes such keys on): a gateway's, whose requests then answer 403 on every
    role-checked endpoint, or an invalid one (401)."""

    def authenticate_credentials(self, key):
        gateway = Gateway.objects.filter(token_hash=hash_token(key)).first()
        if gateway is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return GatewayPrincipal(gateway), gateway


class GatewayOnlyTokenAuthentication(authentication.TokenAuthentication):
    """For endpoints other apps serve to gateways only (metrics ingestion): one query for a
    gateway's key; a user's key is refused with 403 and any other with 401, as the gateway
    protocol's endpoints answer."""

    def authenticate_credentials(self, key):
        digest = hash_token(key)
        gateway = Gateway.objects.filter(token_hash=digest).first()
        if gateway is not None:
            return GatewayPrincipal(gateway), gateway
        if ApiToken.objects.filter(key_hash=digest).exists():
            raise exceptions.PermissionDenied(
                "This endpoint is for gateways: use the gateway's own token."
            )
        raise exceptions.AuthenticationFailed("Invalid token.")
