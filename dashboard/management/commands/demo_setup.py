from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from accounts.roles import ADMIN
from graylane.env import env_str


class Command(BaseCommand):
    help = "Create or reset the demo admin used by `make run` and print how to log in."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, url, **options):
        username = env_str("DEMO_ADMIN_USER", "admin")
        password = env_str("DEMO_ADMIN_PASSWORD", "graylane-demo")
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        user.groups.add(Group.objects.get_or_create(name=ADMIN)[0])
        self.stdout.write(f"Dashboard: {url}  log in as {username} / {password}")
