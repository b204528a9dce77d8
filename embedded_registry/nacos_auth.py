"""Who may use the embedded registry, asked the way Nacos asks (its auth of 1.x and 2.x), so
Nacos clients configured with a username and password work unchanged:

* `POST /nacos/v1/auth/login` trades `username` and `password` for an `accessToken`;
* every naming call carries it, as the `accessToken` parameter (query or form) or as
  `Authorization: Bearer <token>`;
* or, with no accessToken, the call carries `username` and `password` itself (as the Node.js
  SDK nacos-naming does on every call), checked as the login checks them: django-axes counts
  the failures and locks the username out from that address after AXES_FAILURE_LIMIT;
* a refusal is HTTP 403 with Nacos' text: `unknown user!` (login, or a wrong username or
  password on a call), `user not found!` (no credentials), `token invalid!`, `token
  expired!`, `authorization failed!` (a known user whose role does not allow the registry).

An accessToken is the user's id signed with a timestamp (django.core.signing), valid for
EMBEDDED_REGISTRY_TOKEN_TTL seconds and bound to the user's password: a new password, a
deactivated user or a role taken away ends it; there is no table of tokens. A Graylane API
token of a user who may use the registry (role `service`, or admin) is an accessToken too.

EMBEDDED_REGISTRY_AUTH=false waives credentials for requests from loopback only, and not
for proxied ones (a `Forwarded` or `X-Forwarded-For` header): a proxy on this host would
otherwise open the registry to everyone behind it."""

import contextlib
import ipaddress
from dataclasses import dataclass

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, QueryDict
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac
from redis.exceptions import RedisError

from accounts.models import ApiToken, hash_token
from accounts.roles import ADMIN, has_role, may_use_registry
from embedded_registry import clock

# Its module path when tokens were first issued: a new salt would end the ones held now.
SALT = "registry_sync.nacos_auth.access_token"
CHECKED_SALT = "embedded_registry.nacos_auth.checked_password"
ANONYMOUS = "anonymous"

# Nacos' texts (AccessException messages of its auth manager).
UNKNOWN_USER = "unknown user!"
NO_CREDENTIALS = "user not found!"
TOKEN_INVALID = "token invalid!"
TOKEN_EXPIRED = "token expired!"
NOT_ALLOWED = "authorization failed!"


class AccessDenied(Exception):
    """Nacos answers HTTP 403 with this text."""


@dataclass(frozen=True)
class Grant:
    access_token: str
    ttl: int
    username: str
    global_admin: bool


def _signer() -> signing.Signer:
    return signing.Signer(salt=SALT)


# What django.core.signing.TimestampSigner makes and checks, byte for byte, with the time
# from the registry's clock: `value:timestamp` (base 62 seconds), signed.
def _sign_now(value: str) -> str:
    return _signer().sign(f"{value}:{signing.b62_encode(int(clock.now().timestamp()))}")


def _unsign_fresh(signed: str, max_age: int) -> str:
    """The value `signed` was made from, or SignatureExpired when it is older than
    `max_age` seconds, or BadSignature."""
    value, _, timestamp = _signer().unsign(signed).rpartition(":")
    age = clock.now().timestamp() - signing.b62_decode(timestamp)
    if age > max_age:
        raise signing.SignatureExpired(f"Signature age {age} > {max_age} seconds")
    return value


def _binding(user: AbstractBaseUser) -> str:
    """Changes with the user's password, so a new password ends the user's tokens."""
    return salted_hmac(SALT, user.password, algorithm="sha256").hexdigest()[:20]


def login(request: HttpRequest, username: str | None, password: str | None) -> Grant:
    user = authenticate(request, username=username or "", password=password or "")
    if user is None:
        raise AccessDenied(UNKNOWN_USER)
    if not may_use_registry(user):
        raise AccessDenied(NOT_ALLOWED)
    return Grant(
        access_token=_sign_now(f"{user.pk}:{_binding(user)}"),
        ttl=settings.EMBEDDED_REGISTRY_TOKEN_TTL,
        username=user.get_username(),
        global_admin=has_role(user, ADMIN),
    )


def is_local(request: HttpRequest) -> bool:
    """From a loopback address, and not relayed by a proxy."""
    meta = request.META
    if "HTTP_FORWARDED" in meta or "HTTP_X_FORWARDED_FOR" in meta:
        return False
    try:
        address = ipaddress.ip_address(meta.get("REMOTE_ADDR", "").split("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _credential(request: HttpRequest, params: QueryDict) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header.startswith("Bearer ") and header[7:].strip():
        return header[7:].strip()
    return (params.get("accessToken") or "").strip()


def _user_of_access_token(value: str) -> User:
    try:
        signed = _unsign_fresh(value, settings.EMBEDDED_REGISTRY_TOKEN_TTL)
    except signing.SignatureExpired:
        raise AccessDenied(TOKEN_EXPIRED) from None
    except signing.BadSignature:
        raise AccessDenied(TOKEN_INVALID) from None
    pk, _, binding = signed.partition(":")
    user = get_user_model().objects.filter(pk=pk, is_active=True).first()
    if user is None or not constant_time_compare(binding, _binding(user)):
        raise AccessDenied(TOKEN_INVALID)
    return user


def _user_of_api_token(key: str) -> User:
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(key)).first()
    if token is None or not token.user.is_active:
        raise AccessDenied(TOKEN_INVALID)
    now = timezone.now()
    # As for the REST API: a write per heartbeat would be too many; a minute is enough.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def _checked_key(user: AbstractBaseUser, password: str) -> str:
    """Where a successful check of (user, password) is remembered: a keyed hash (SECRET_KEY),
    so the cache never holds a password, over the user's password hash too, so a new
    password (a new hash, a new salt) misses what the old one left."""
    pair = f"{user.get_username()}\0{password}\0{user.password}"
    digest = salted_hmac(CHECKED_SALT, pair, algorithm="sha256").hexdigest()
    return f"embedded_registry:checked:{digest}"


# The cache only saves work: with Redis down, every call's password is checked.
def _was_checked(key: str) -> bool:
    try:
        return bool(cache.get(key))
    except RedisError:
        return False


def _remember_checked(key: str) -> None:
    if settings.EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS:
        with contextlib.suppress(RedisError):
            cache.set(key, True, timeout=settings.EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS)


def _user_of_password(request: HttpRequest, username: str, password: str) -> User:
    """Nacos' credentials without an accessToken. Clients send them on every heartbeat and
    a password hash is slow by design (PBKDF2: bench/nacos_auth.py), so a success is remembered
    for EMBEDDED_REGISTRY_PASSWORD_CACHE_SECONDS; a locked-out username is always checked
    again, so the cache never answers for a lock (nor tells a guesser its guess was right)."""
    model = get_user_model()
    user = model.objects.filter(**{model.USERNAME_FIELD: username}, is_active=True).first()
    if (
        user is not None
        and _was_checked(_checked_key(user, password))
        and AxesProxyHandler.is_allowed(request, {"username": username})
    ):
        return user
    checked = authenticate(request, username=username, password=password)
    if checked is None:
        raise AccessDenied(UNKNOWN_USER)
    _remember_checked(_checked_key(checked, password))
    return checked


def actor_of(request: HttpRequest, params: QueryDict) -> str:
    """The username a naming call comes from (the audit log's actor), or AccessDenied.
    Credentials that are sent are always checked; only missing ones may be waived."""
    credential = _credential(request, params)
    username, password = params.get("username") or "", params.get("password") or ""
    if not credential and not (username or password):
        if not settings.EMBEDDED_REGISTRY_AUTH and is_local(request):
            return ANONYMOUS
        raise AccessDenied(NO_CREDENTIALS)
    if not credential:
        user = _user_of_password(request, username, password)
    # A signed accessToken has colons (value:timestamp:signature); an API key is hex.
    elif ":" in credential:
        user = _user_of_access_token(credential)
    else:
        user = _user_of_api_token(credential)
    if not may_use_registry(user):
        raise AccessDenied(NOT_ALLOWED)
    return user.get_username()
