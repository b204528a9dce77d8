"""Secrets Graylane must use itself, so cannot hash (a gateway's push secret, the passwords
it logs in to Nacos and registries with), kept encrypted at rest: Fernet (AES-CBC with an
HMAC) with the keys of GRAYLANE_SECRET_KEYS, the first of which encrypts and every one of
which decrypts, so keys can be rotated (README: Secrets at rest).

A row's secret is decrypted when the attribute is first read, not when the row is loaded:
the gateway endpoints load a gateway per call and never need its secrets."""

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings
from django.core import validators
from django.db import models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.expressions import Expression
from django.db.models.query_utils import DeferredAttribute

# The longest password kept for logging in elsewhere (Nacos, Eureka): longer is refused with
# a field message.
MAX_PASSWORD_LENGTH = 1024


class SecretUnreadable(Exception):
    """A stored secret none of GRAYLANE_SECRET_KEYS opens (its key was removed too early)."""


@lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _keys() -> MultiFernet:
    return _fernet(tuple(settings.GRAYLANE_SECRET_KEYS))


def encrypt(text: str) -> str:
    return _keys().encrypt(text.encode()).decode()


def decrypt(token: str, where: str = "a secret") -> str:
    try:
        return _keys().decrypt(token.encode()).decode()
    except InvalidToken:
        raise _unreadable(where) from None


def reencrypt(token: str, where: str = "a secret") -> str:
    """`token` encrypted again with the first key (for a rotation)."""
    try:
        return _keys().rotate(token.encode()).decode()
    except InvalidToken:
        raise _unreadable(where) from None


def _unreadable(where: str) -> SecretUnreadable:
    return SecretUnreadable(
        f"{where}: no key in GRAYLANE_SECRET_KEYS decrypts it (was the key that encrypted it "
        "removed before `manage.py reencrypt_secrets` ran?)"
    )


class Stored:
    """A secret as the database holds it, until the attribute is read."""

    __slots__ = ("token",)

    def __init__(self, token: str):
        self.token = token

    def __repr__(self) -> str:
        return "<encrypted secret>"


class _DecryptedOnRead(DeferredAttribute):
    def __get__(self, instance: models.Model | None, cls: type[models.Model] | None = None) -> Any:
        if instance is None:
            return self
        value = super().__get__(instance, cls)
        if isinstance(value, Stored):
            value = decrypt(value.token, f"{self.field.model._meta.label}.{self.field.name}")
            instance.__dict__[self.field.attname] = value
        return value

    def __set__(self, instance: models.Model, value: object) -> None:
        instance.__dict__[self.field.attname] = value


class EncryptedTextField(models.TextField):
    """Text that is clear in Python and encrypted in the column, a text column because the
    ciphertext is longer (1,464 characters for a 1,024-character password). `max_length`
    bounds the clear text. Empty stays empty, so "is there a password" needs no key. Lookups
    by value cannot match (each encryption differs); nothing looks a secret up."""

    descriptor_class = _DecryptedOnRead

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.max_length is not None:
            self.validators.append(validators.MaxLengthValidator(self.max_length))

    def from_db_value(
        self, value: str | None, expression: Expression, connection: BaseDatabaseWrapper
    ) -> Stored | str | None:
        return Stored(value) if value else value

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # An unread secret is saved as it was loaded, not decrypted and encrypted again.
        stored = model_instance.__dict__.get(self.attname)
        return stored if isinstance(stored, Stored) else super().pre_save(model_instance, add)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, Stored):
            return value.token
        value = super().get_prep_value(value)
        return encrypt(value) if value else value


def encrypt_column(model: type[models.Model], field_name: str) -> None:
    """For a data migration: encrypt the clear values of `field_name` (a plain text column
    in the historical `model`) where they are stored."""
    _rewrite_column(model, field_name, encrypt)


def decrypt_column(model: type[models.Model], field_name: str) -> None:
    """The reverse of `encrypt_column`."""
    _rewrite_column(model, field_name, decrypt)


def _rewrite_column(
    model: type[models.Model], field_name: str, change: Callable[[str], str]
) -> None:
    rows = model._default_manager.exclude(**{field_name: ""})
    for pk, value in list(rows.values_list("pk", field_name)):
        model._default_manager.filter(pk=pk).update(**{field_name: change(value)})


def reencrypt_everything() -> int:
    """Every stored secret encrypted again with the first key (`manage.py
    reencrypt_secrets`, a step of a key rotation); how many were. Each table's rows are
    locked meanwhile, so a secret changed at the same time is not overwritten."""
    count = 0
    for model in apps.get_models():
        fields = [f for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if not fields:
            continue
        rows = model._default_manager.select_for_update().only("pk", *(f.name for f in fields))
        with transaction.atomic():
            for row in rows:
                changed = {
                    field.attname: Stored(
                        reencrypt(stored.token, f"{model._meta.label}.{field.name}")
                    )
                    for field in fields
                    if isinstance(stored := row.__dict__.get(field.attname), Stored)
                }
                if changed:
                    model._default_manager.filter(pk=row.pk).update(**changed)
                    count += len(changed)
    return count
