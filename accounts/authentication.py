from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, hash_token
from gateways.auth import authenticate_gateway


class ApiTokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>` against hashed, per-user API tokens."""

    def authenticate_credentials(self, key):
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(key)).first()
        if token is None:
            return self.authenticate_other(key)
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        # A write per request would serialise all API traffic on one row; a minute is enough.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_other(self, key):
        # Not a user's token: a gateway's, or invalid (AuthenticationFailed).
        return authenticate_gateway(key)
