from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from accounts.bindings import bind
from accounts.models import ApiToken
from accounts.roles import ALL_ROLES, SERVICE


class Command(BaseCommand):
    help = "Create the user if missing, put it in a role and print a new API token last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ALL_ROLES, required=True)
        parser.add_argument("--name", default="", help="A label for the token.")
        parser.add_argument(
            "--service",
            action="append",
            dest="services",
            default=[],
            help="With --role service: bind the user to this service (repeatable); the "
            "bindings become exactly those given.",
        )

    @transaction.atomic
    def handle(
        self, username: str, role: str, name: str, services: list[str], **options: Any
    ) -> None:
        if services and role != SERVICE:
            raise CommandError("--service binds a user of the service role only.")
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        # One role per user keeps "what can this user do" a single answer.
        user.groups.remove(*Group.objects.filter(name__in=ALL_ROLES))
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        if role != SERVICE or services:
            # Bindings mean something for the service role only; without --service a
            # service user keeps the ones it has (a new token, same instances).
            bind(user, services)
        _, key = ApiToken.objects.issue(user, name=name or "issue_token")
        verb = "Created" if created else "Updated"
        bound = f", bound to {', '.join(sorted(set(services)))}" if services else ""
        self.stderr.write(f"{verb} user {username!r} with role {role}{bound}.")
        self.stdout.write(key)
