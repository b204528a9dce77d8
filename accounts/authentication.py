from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework import authentication, exceptions

from accounts.models import ApiToken, hash_token


class ApiTokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>` against hashed, per-user API tokens. A key that is no
    user's is left to the authentication classes after this one (settings)."""

    # DRF's authenticate hands None on (the next class may know the key); its stubs want a pair.
    def authenticate_credentials(self, key: str) -> tuple[User, ApiToken] | None:  # type: ignore[override]
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(key)).first()
        if token is None:
            return None
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        # A write per request would serialise all API traffic on one row; a minute is enough.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
