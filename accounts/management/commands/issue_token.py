from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from accounts.models import ApiToken
from accounts.roles import ALL_ROLES


class Command(BaseCommand):
    help = "Create the user if missing, put it in a role and print a new API token last."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ALL_ROLES, required=True)
        parser.add_argument("--name", default="", help="A label for the token.")

    @transaction.atomic
    def handle(self, username: str, role: str, name: str, **options: Any) -> None:
        user, created = get_user_model().objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        # One role per user keeps "what can this user do" a single answer.
        user.groups.remove(*Group.objects.filter(name__in=ALL_ROLES))
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        _, key = ApiToken.objects.issue(user, name=name or "issue_token")
        verb = "Created" if created else "Updated"
        self.stderr.write(f"{verb} user {username!r} with role {role}.")
        self.stdout.write(key)
