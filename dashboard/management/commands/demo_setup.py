from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from accounts.models import ApiToken
from accounts.roles import ADMIN, SERVICE
from graylane.env import env_str

FLEET_USER = "demo-fleet"


class Command(BaseCommand):
    help = (
        "Create or reset the demo admin used by `make run` and the demo fleet's `service` "
        "user (embedded registry), and print how to log in."
    )

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
        self.fleet_user(url)

    def fleet_user(self, url):
        """The demo fleet registers with the embedded registry as `demo-fleet` (role
        service): a Nacos client logs in with its password, or sends the API token written
        to var/demo-fleet.token as accessToken."""
        password = env_str("DEMO_FLEET_PASSWORD", "graylane-fleet")
        user, _ = get_user_model().objects.get_or_create(username=FLEET_USER)
        user.set_password(password)
        user.save()
        user.groups.set([Group.objects.get_or_create(name=SERVICE)[0]])
        user.api_tokens.filter(name=FLEET_USER).delete()  # one demo token, not one per run
        _, key = ApiToken.objects.issue(user, name=FLEET_USER)
        token_file = settings.VAR_DIR / f"{FLEET_USER}.token"
        token_file.touch(mode=0o600)
        token_file.chmod(0o600)
        token_file.write_text(key + "\n")
        self.stdout.write(
            f"Embedded registry: {url}nacos  as {FLEET_USER} / {password}"
            f" (API token in {token_file})"
        )
