from typing import Any

from django.core.management.base import BaseCommand

from accounts.secret_fields import reencrypt_everything


class Command(BaseCommand):
    help = (
        "Encrypt every stored secret again with the first key of GRAYLANE_SECRET_KEYS "
        "(a key rotation: README, Secrets at rest); older keys may go afterwards."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = reencrypt_everything()
        self.stdout.write(f"Re-encrypted {count} secrets with the first key.")
