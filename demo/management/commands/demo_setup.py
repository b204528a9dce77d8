from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser

from accounts.models import ApiToken, hash_token
from accounts.roles import ADMIN, SERVICE
from audit.models import AuditEntry
from gateways.models import Gateway
from gateways.services import create_gateway, delete_gateway
from graylane.env import env_str
from policy.lanes import lanes_of
from policy.publishing import StaleRevision, load_state
from policy.services import create_lane, update_policy
from routing_engine import PolicyError

FLEET_USER = "demo-fleet"
GATEWAY = "demo-gateway"
ACTOR = "demo-setup"
# The reference design's gateway filter with its header rule on and empty lists: a plain
# request from this machine gets V1 at both hops, `gray: gray-996` gets V2 at both.
DEMO_POLICY = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": [],
    "cities": [],
    "users": [],
}
INITIAL_REVISION = 1  # policy.publishing: the default policy, never edited
# Lanes beside the gray one (docs/gray-release-design.md, "Lanes"): a tester's header sends a
# request to V3 at both hops of the demo fleet (demo/fleet.py runs V3 of both services), or,
# in feature-y, which has order-app only, to prod user-app and then to order-app V3.
DEMO_LANES: dict[str, dict[str, Any]] = {
    "feature-x": {
        "priority": 100,
        "match": {"header": {"name": "x-lane", "value": "feature-x"}},
        "members": {"user-app": "V3", "order-app": "V3"},
    },
    "feature-y": {
        "priority": 110,
        "match": {"header": {"name": "x-lane", "value": "feature-y"}},
        "members": {"order-app": "V3"},
    },
}


def _write_secret(path: Path, value: str) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(value + "\n")


class Command(BaseCommand):
    help = (
        "Create or reset the demo admin used by `make run` and the demo fleet's `service` "
        "user (embedded registry), and print how to log in."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000/")
        parser.add_argument(
            "--demo",
            action="store_true",
            help="also the demo fleet's pull gateway (its token in var/demo-gateway.token) and, "
            "on a policy never edited, the demo policy; without it, the demo gateway an "
            "earlier run made is deleted",
        )

    def handle(self, url: str, demo: bool, **options: Any) -> None:
        username = env_str("DEMO_ADMIN_USER", "admin")
        password = env_str("DEMO_ADMIN_PASSWORD", "graylane-demo")
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        user.groups.add(Group.objects.get_or_create(name=ADMIN)[0])
        self.stdout.write(f"Dashboard: {url}  log in as {username} / {password}")
        self.fleet_user(url)
        if demo:
            self.demo_gateway()
            self.demo_policy()  # first: only the never-edited initial revision gets it
            self.demo_lanes()
        else:
            self.retire_demo_gateway()

    def fleet_user(self, url: str) -> None:
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
        _write_secret(token_file, key)
        self.stdout.write(
            f"Embedded registry: {url}nacos  as {FLEET_USER} / {password}"
            f" (API token in {token_file})"
        )

    def demo_gateway(self) -> None:
        """The demo gateway, a pull gateway whose token is in var/demo-gateway.token. A
        token is shown once only, so the record is kept while that file still holds its
        token, and made anew (both audited) when the file is gone or holds another."""
        token_file = settings.VAR_DIR / f"{GATEWAY}.token"
        existing = Gateway.objects.filter(name=GATEWAY).first()
        known = token_file.read_text().strip() if token_file.exists() else ""
        if existing is not None and known and hash_token(known) == existing.token_hash:
            return
        if existing is not None:
            delete_gateway(existing, actor=ACTOR)
        _, token, _ = create_gateway({"name": GATEWAY, "mode": Gateway.PULL}, actor=ACTOR)
        _write_secret(token_file, token)
        self.stdout.write(f"Demo gateway: {GATEWAY} (pull), token in {token_file}")

    def retire_demo_gateway(self) -> None:
        """Without the demo fleet nothing runs the demo gateway: the record an earlier run
        made would show as stale forever, so it goes (audited) with its token file. One of
        that name an operator made is theirs, and stays."""
        gateway = Gateway.objects.filter(name=GATEWAY).first()
        if gateway is None:
            return
        made_by = (
            AuditEntry.objects.filter(action="gateway.create", object=f"gateway {GATEWAY}")
            .values_list("actor", flat=True)
            .first()  # AuditEntry's ordering: the newest first
        )
        if made_by != ACTOR:
            return
        delete_gateway(gateway, actor=ACTOR)
        (settings.VAR_DIR / f"{GATEWAY}.token").unlink(missing_ok=True)
        self.stdout.write(f"Demo gateway: {GATEWAY} deleted (DEMO=false: nothing runs it)")

    def demo_policy(self) -> None:
        """The demo policy, published as a revision (and audited) only while the policy is
        the never-edited initial one: an operator's later edits are never overwritten."""
        revision = load_state().revision
        if revision != INITIAL_REVISION:
            self.stdout.write(f"Policy: revision {revision} kept as it is (edited before)")
            return
        try:
            update_policy(
                DEMO_POLICY,
                partial=True,
                actor=ACTOR,
                source="api",
                expected_revision=INITIAL_REVISION,
                comment="Demo: the reference design's header rule (gray: gray-996).",
            )
        except StaleRevision:
            return  # someone published first: theirs stands
        self.stdout.write("Demo policy: header gray: gray-996 → V2, routing on")

    def demo_lanes(self) -> None:
        """The demo's lanes, each published (a revision, audited) when there is no lane of
        its name and none was ever deleted: a lane an operator changed or deleted stays
        so."""
        existing = lanes_of(load_state().document)
        for name, lane in DEMO_LANES.items():
            if name in existing:
                continue
            if AuditEntry.objects.filter(action="lane.delete", object=f"lane {name}").exists():
                self.stdout.write(f"Lane {name}: deleted before, not made again")
                continue
            try:
                create_lane(name, lane, actor=ACTOR, source="api", comment="Demo lane.")
            except PolicyError:
                continue  # someone made a lane of that name meanwhile: theirs stands
            header = lane["match"]["header"]
            members = ", ".join(f"{svc} {version}" for svc, version in lane["members"].items())
            self.stdout.write(
                f"Demo lane {name}: header {header['name']}: {header['value']} → {members}"
            )
