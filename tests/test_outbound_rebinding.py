"""A registry host name that resolves to a loopback registry when it is saved, and to the
cloud metadata address later: the dashboard's syncs are refused from then on, and no request
leaves for it.

The dashboard is a real server process whose resolver reads a hosts file of this test's own
(bind-mounted over /etc/hosts in a mount namespace of its own, `unshare -m`), so the test
changes what the name resolves to while the server runs, as a DNS change would."""

import shutil
import subprocess

import httpx
import pytest
from django.db import connection

from accounts.models import ApiToken
from registry_sync.models import UNREACHABLE
from testing.fakes.nacos_fake import FakeNacos
from testing.processes import AsgiServer, database_url, django_env
from testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
NAME = "nacos.graylane.test"
# The shell run by `unshare -m`: its own /etc/hosts ($0), then the server ("$@").
OWN_HOSTS = 'mount --bind "$0" /etc/hosts && exec "$@"'


def hosts(path, address: str) -> None:
    """Rewritten in place (the same inode), so the bind mount shows the new content."""
    with open(path, "w") as file:
        file.write(f"127.0.0.1 localhost\n{address} {NAME}\n")


def own_hosts_possible(path) -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-m", "sh", "-c", OWN_HOSTS, str(path), "getent", "hosts",
                           NAME], capture_output=True, text=True, timeout=10)  # fmt: skip
    return done.returncode == 0 and done.stdout.startswith("127.0.0.1")


def test_a_name_that_resolves_to_the_metadata_address_later_is_refused_at_connect(
    tmp_path, make_user
):
    hosts_file = tmp_path / "hosts"
    hosts(hosts_file, "127.0.0.1")
    if not own_hosts_possible(hosts_file):
        pytest.skip("needs `unshare -m` and mount (root, as in CI) for a hosts file of its own")
    admin = {"Authorization": f"Token {ApiToken.objects.issue(make_user('ada', 'admin'))[1]}"}
    viewer = {"Authorization": f"Token {ApiToken.objects.issue(make_user('vera', 'viewer'))[1]}"}
    env = django_env(
        database_url(connection.settings_dict),
        IN_PROCESS_JOBS="true",  # the syncs run in the server, with its resolver
        REDIS_URL="",
        GRAYLANE_VAR_DIR=str(tmp_path),
    )
    with FakeNacos() as nacos:
        nacos.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        server = AsgiServer(env)
        server.args = ["unshare", "-m", "sh", "-c", OWN_HOSTS, str(hosts_file), *server.args]
        with server, httpx.Client(base_url=server.url, timeout=10) as api:
            registry = {"name": "rebind", "kind": "nacos", "sync_interval": 0.5,
                        "base_url": f"http://{NAME}:{nacos.port}/nacos"}  # fmt: skip
            created = api.post("/api/v1/registries/", json=registry, headers=admin)
            assert created.status_code == 201, created.text  # the name is loopback now
            url = f"/api/v1/registries/{created.json()['id']}/"

            def instances() -> list:
                return api.get("/api/v1/services/user-app/instances/", headers=viewer).json()

            synced = wait_until(lambda: instances().get("results"), 30, "a sync through the name")
            assert [row["host"] for row in synced] == ["10.0.0.1"]

            hosts(hosts_file, "169.254.169.254")
            refused = wait_until(
                lambda: (body := api.get(url, headers=admin).json())["stale"] and body, 10,
                "the registry stale",
            )  # fmt: skip
            assert (
                f"{NAME} resolves to 169.254.169.254, which is a cloud metadata address: "
                "refused (OUTBOUND_DENIED_NETWORKS)"
            ) in refused["last_error"], refused["last_error"]
            assert api.get(url, headers=viewer).json()["last_error"] == UNREACHABLE
            asked = len(nacos.requests_log)
            syncs = set()

            def four_more_syncs() -> bool:
                syncs.add(api.get(url, headers=admin).json()["last_sync_at"])
                return len(syncs) > 4

            wait_until(four_more_syncs, 30, "four more syncs (each refused)")
            assert api.get(url, headers=admin).json()["stale"] is True
            assert len(nacos.requests_log) == asked  # nothing reached the registry since
            assert [row["host"] for row in instances()["results"]] == ["10.0.0.1"]  # kept

            # Saving it again is refused now that the name points there.
            again = api.patch(url, json={"base_url": registry["base_url"]}, headers=admin)
            assert again.status_code == 400
            assert f"{NAME} resolves to 169.254.169.254" in again.json()["base_url"][0]
