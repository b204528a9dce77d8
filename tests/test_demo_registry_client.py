"""dataplane/registry_client.py against the embedded registry of a real dashboard process,
and against the Nacos contract fake (1.x and 2.x answer shapes): the same calls work on both."""

import asyncio

import pytest

from dataplane.registry_client import AccessDenied, Instance, NamingClient, Registration
from testing.demo_processes import FLEET_PASSWORD, FLEET_USER, fresh_dashboard
from testing.fakes.nacos_fake import FakeNacos

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

USER_V2 = Instance(service="user-app", ip="127.0.0.1", port=7202, metadata={"version": "V2"})


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    with fresh_dashboard(tmp_path_factory.mktemp("registry-client")) as server:
        yield server


@pytest.fixture(params=["embedded", "nacos-1.x", "nacos-2.x"])
def registry(request):
    """(server URL, username, password) of a registry with auth on."""
    if request.param == "embedded":
        yield request.getfixturevalue("dashboard").url + "/nacos", FLEET_USER, FLEET_PASSWORD
        return
    version = request.param.removeprefix("nacos-")
    with FakeNacos(version=version, username="nacos", password="nacos-pw") as fake:
        yield fake.url, "nacos", "nacos-pw"


def client_of(registry, **overrides) -> NamingClient:
    url, username, password = registry
    return NamingClient(url, **{"username": username, "password": password, **overrides})


async def test_register_list_beat_deregister(registry):
    async with client_of(registry) as client:
        await client.register(USER_V2)
        listed = await client.list_instances("user-app", healthy_only=True)
        assert [(i.ip, i.port, i.version, i.healthy) for i in listed] == [
            ("127.0.0.1", 7202, "V2", True)
        ]
        beat = await client.beat(USER_V2)
        assert beat.found and beat.interval_s == 5.0
        await client.deregister(USER_V2)
        assert await client.list_instances("user-app") == []
        # A beat with its beat info brings a forgotten instance back, as Nacos' server does.
        assert (await client.beat(USER_V2)).found
        assert [i.port for i in await client.list_instances("user-app")] == [7202]
        await client.deregister(USER_V2)


async def test_wrong_or_missing_credentials_are_refused(registry):
    async with client_of(registry, password="wrong") as client:
        with pytest.raises(AccessDenied):
            await client.register(USER_V2)
    async with client_of(registry, username=None, password=None) as anonymous:
        with pytest.raises(AccessDenied, match="user not found!"):
            await anonymous.list_instances("user-app")
    async with client_of(registry, username=None, access_token="not-a-token") as forged:
        with pytest.raises(AccessDenied, match="token invalid!"):
            await forged.list_instances("user-app")


async def test_an_expired_token_is_renewed_by_logging_in_again():
    with FakeNacos(version="2.x", username="nacos", password="nacos-pw") as fake:
        async with NamingClient(fake.url, username="nacos", password="nacos-pw") as client:
            await client.register(USER_V2)
            fake.expire_tokens()
            assert [i.port for i in await client.list_instances("user-app")] == [7202]


async def test_a_registration_keeps_the_instance_until_stopped(registry):
    async with client_of(registry) as client:
        registration = Registration(client, USER_V2)
        registration.start()
        await asyncio.wait_for(registration.registered.wait(), 5)
        assert [i.version for i in await client.list_instances("user-app")] == ["V2"]
        await registration.stop()
        assert await client.list_instances("user-app") == []
