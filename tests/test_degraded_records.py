"""One bad record never freezes the fleet: an instance without a `version` (Nacos and Eureka
allow one) takes `ALL` traffic only, and a document with records a gateway cannot use is
applied without them, acked with what was skipped. A real dashboard (uvicorn), instances in
its embedded registry, and `python -m dataplane.gateway` as a process, over loopback."""

import asyncio
import json
from collections import Counter

import httpx
import pytest
from django.utils import timezone

from dataplane.registry_client import NamingClient
from dataplane.sdk.balancer import ServiceBalancer
from gateways.models import Generation
from registry_sync.models import Registry
from registry_sync.sync import sync_registry
from testing.agent_lab import engines, start_agent
from testing.fakes.nacos_fake import FakeNacos
from testing.gateway_lab import auth
from testing.waiting import async_wait_until, wait_until
from tests.test_gateway_routing import SEED_RULES

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def served(gateway, count: int, path: str = "/user-app/hello", **headers) -> Counter:
    """Which instances answered `count` requests (by their `version@port` names)."""
    answers = Counter()
    for _ in range(count):
        response = httpx.get(gateway.url + path, headers=headers, timeout=5)
        assert response.status_code == 200, response.text
        answers[response.json()["instance"]] += 1
    return answers


def until_served_by(process, expected: set[str], what: str, **headers) -> None:
    """Wait until requests reach exactly the instances `expected` (once the generation that
    routes so is in force): a batch reaching any other starts the count again."""
    reached: set[str] = set()

    def done() -> bool:
        batch = set(served(process, len(expected), **headers))
        if not batch <= expected:
            reached.clear()
            return False
        reached.update(batch)
        return reached == expected

    wait_until(done, 10, what)


def register_without_version(lab, port: int) -> None:
    """What any Nacos client may do: register with no `version` in the metadata."""
    response = httpx.post(
        lab.dashboard.url + "/nacos/v1/ns/instance",
        params={
            "serviceName": "user-app",
            "ip": "127.0.0.1",
            "port": port,
            "accessToken": lab.service_token,
        },
    )
    assert response.text == "ok", response.text


def in_sync(lab, name: str):
    row = lab.gateway_row(name)
    ok = row["status"] == "in_sync" and row["acked_generation"] == row["desired_generation"]
    return row if ok else None


def test_an_instance_without_a_version_takes_all_traffic_only_and_freezes_no_gateway(lab):
    v1, v2 = lab.instance("user-app", "V1"), lab.instance("user-app", "V2")
    bare = lab.fleet.add("none")
    register_without_version(lab, bare.port)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--poll-wait", "1")
    row = wait_until(lambda: in_sync(lab, "gw-test"), 5, "the gateway acks the generation")
    assert row["skipped"] == []  # the dashboard sent nothing a gateway must refuse

    # Gray on: PROD and GRAY go by version, and the version-less instance has none.
    assert served(gateway, 6) == {v1.name: 6}
    assert served(gateway, 6, gray="gray-996") == {v2.name: 6}

    # A later policy change still reaches the gateway: gray off, ALL reaches all three.
    lab.policy(enabled=False)
    wait_until(lambda: bare.name in served(gateway, 6), 5, "ALL traffic on the bare instance")
    assert served(gateway, 9) == {v1.name: 3, v2.name: 3, bare.name: 3}
    wait_until(lambda: in_sync(lab, "gw-test"), 5, "the ack of the new generation")

    headers = auth(lab.admin_token)
    listed = httpx.get(
        lab.dashboard.url + "/api/v1/services/user-app/instances/", headers=headers
    ).json()["results"]
    assert {i["port"]: i["version"] for i in listed} == {
        v1.port: "V1",
        v2.port: "V2",
        bare.port: None,
    }
    service = httpx.get(lab.dashboard.url + "/api/v1/services/user-app/", headers=headers)
    assert service.json()["instances"] == {"UP": 3, "no_version": 1}


def test_the_registrys_default_version_puts_a_bare_instance_in_prod(lab):
    v1 = lab.instance("user-app", "V1")
    bare = lab.fleet.add("none")
    register_without_version(lab, bare.port)
    lab.sync()
    lab.policy(**SEED_RULES)
    gateway = lab.start_gateway("--poll-wait", "1")
    wait_until(lambda: in_sync(lab, "gw-test"), 5, "the first ack")
    assert served(gateway, 4) == {v1.name: 4}

    response = httpx.patch(
        f"{lab.dashboard.url}/api/v1/registries/{lab.registry.pk}/",
        json={"default_version": "V1"},
        headers=auth(lab.admin_token),
    )
    assert response.status_code == 200, response.text
    assert response.json()["default_version"] == "V1"
    lab.registry.refresh_from_db()
    lab.sync()
    wait_until(lambda: bare.name in served(gateway, 4), 5, "PROD traffic on the bare instance")
    assert served(gateway, 4) == {v1.name: 2, bare.name: 2}
    listed = httpx.get(
        lab.dashboard.url + "/api/v1/services/user-app/instances/",
        headers=auth(lab.admin_token),
    ).json()["results"]
    assert {i["port"]: i["version"] for i in listed} == {v1.port: "V1", bare.port: "V1"}


# -- a document with records a gateway cannot use -----------------------------------------

BAD_ID = "10.0.0.5#7201#DEFAULT#DEFAULT_GROUP@@user-app"


def store_generation(lab, mutate) -> int:
    """A newer generation whose document is the newest one changed by `mutate`, stored as a
    dashboard of another version (or a hand edit) would have stored it; the dashboard
    serves it as it serves any generation."""
    newest = Generation.objects.order_by("-number").first()
    document = json.loads(newest.content)
    document["generation"] = number = newest.number + 1
    mutate(document)
    Generation.objects.create(
        number=number,
        revision=newest.revision,
        checksum=f"stored-{number}",
        content=json.dumps(document),
        reason="stored by another dashboard",
        created_at=timezone.now(),
    )
    return number


def with_bad_records(document) -> None:
    user_app = document["services"]["user-app"]
    user_app["instances"].append(
        {"id": BAD_ID, "host": "10.0.0.5", "port": 0, "version": "V1", "weight": 1.0}
    )
    user_app["percent"] = 101
    for instance in user_app["instances"]:
        if instance["version"] == "V1" and instance["id"] != BAD_ID:
            instance["version"] = ""  # an older dashboard's "no version": the first V1 one
            break
    document["services"]["order-app"]["prod"] = ""
    document["gray"]["header"]["value"] = "canary"  # the valid part, to be applied


def consumers():
    """The Python gateway and the agent with each engine (skipped where one is missing)."""
    return [pytest.param("gateway"), *engines()]


def start_consumer(lab, consumer: str):
    """(the started process, its gateway name)."""
    if consumer == "gateway":
        return lab.start_gateway("--poll-wait", "1"), "gw-test"
    return start_agent(lab, consumer, "--poll-wait", "1"), "gw-agent"


def acked(lab, name: str, generation: int, process):
    """The gateway's row once it runs `generation` (or a newer one) and is in sync."""
    row = lab.gateway_row(name)
    runs = (process.generation() or 0) >= generation
    return (
        row
        if runs and row["acked_generation"] >= generation and row["status"] == "in_sync"
        else None
    )


@pytest.mark.parametrize("consumer", consumers())
def test_records_a_gateway_cannot_use_are_skipped_the_rest_applied_and_it_stays_in_sync(
    lab, consumer, client, make_user
):
    v1s = sorted((lab.instance("user-app", "V1") for _ in range(2)), key=lambda u: u.port)
    v2 = lab.instance("user-app", "V2")
    order = lab.instance("order-app", "V1")
    lab.sync()
    lab.policy(**SEED_RULES)
    process, name = start_consumer(lab, consumer)
    before = wait_until(lambda: in_sync(lab, name), 10, "the first ack")["acked_generation"]
    assert set(served(process, 8)) == {u.name for u in v1s}

    number = store_generation(lab, with_bad_records)
    row = wait_until(lambda: acked(lab, name, number, process), 10, "the ack with skipped records")
    assert row["last_error"] == ""
    bare = next(u for u in v1s if f"#{u.port}#" in json.dumps(row["skipped"]))
    (kept,) = [u for u in v1s if u is not bare]
    assert {entry["record"]: entry["reason"] for entry in row["skipped"]} == {
        f"services.user-app.instances[127.0.0.1#{bare.port}#DEFAULT#DEFAULT_GROUP@@user-app]"
        ".version": "version: '' is empty; it takes ALL traffic only",
        f"services.user-app.instances[{BAD_ID}]": "port: 0 is not a port",
        "services.user-app.percent": "Must be between 0 and 100, got 101. (the policy's percent "
        "applies)",
        "services.order-app": f"prod: '' is empty; routed as in generation {before}",
    }
    # The valid part is in force: the new header rule, the instance without a version out of
    # PROD; order-app keeps the entry that was in force.
    assert served(process, 4, gray="canary") == {v2.name: 4}
    assert served(process, 6, gray="gray-996") == {kept.name: 6}
    assert served(process, 2, path="/order-app/hello") == {order.name: 2}
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/gateways/").content.decode()
    assert f"services.user-app.instances[{BAD_ID}]" in page
    assert "port: 0 is not a port" in page

    # A later generation (a real policy change) reaches it, and it skips nothing any more.
    lab.policy(header={"name": "gray", "value": "blue"})
    wait_until(
        lambda: (row := acked(lab, name, number + 1, process)) and row["skipped"] == [],
        10,
        "the next generation, acked with nothing skipped",
    )
    assert served(process, 4, gray="blue") == {v2.name: 4}
    assert set(served(process, 8)) == {u.name for u in v1s}


# -- every kind of bad registry entry, through the real registry -> sync -> document chain ---

# Instances without a usable version: each stored with `"version": null`, ALL traffic only.
NO_VERSION = {
    "missing": None,
    "empty": "",
    "blank": "   ",
    "control": "V1\x01",
    "too long": "V" * 65,
}
# Entries the sync skips (the registry's row names them): (what is wrong, raw fields).
UNUSABLE = [
    ("port not a number", {"port": "abc"}),
    ("port 0", {"port": 0}),
    ("weight not a number", {"weight": float("nan")}),
    ("weight below 0", {"weight": -1.0}),
    ("no ip", {"ip": None}),
    ("ip with a zone", {"ip": "fe80::1%eth0"}),
    ("ip not an address", {"ip": "10.0.0.1 ; x"}),
]


def corrupt(nacos, stored_at: int, /, **raw) -> None:
    """Make the contract fake serve these raw values for the instance stored at port `stored_at`
    (what a broken client, proxy or server version could produce)."""
    with nacos.lock:
        record = nacos.services[("public", "DEFAULT_GROUP", "user-app")][
            ("127.0.0.1", stored_at, "DEFAULT")
        ]
        for name, value in raw.items():
            setattr(record, name, value)


@pytest.fixture
def bad_registry(lab):
    """A Nacos (the contract fake) holding user-app at V1 and V2, one instance of each kind
    without a usable version (each a real server), one of each kind the sync must skip, one
    whose metadata the sync refuses (a NUL in the version; a real server) and a service whose
    name is refused."""
    with FakeNacos() as nacos:
        good = {"V1": lab.fleet.add("V1"), "V2": lab.fleet.add("V2")}
        for version, upstream in good.items():
            nacos.add_instance(
                "user-app", "127.0.0.1", upstream.port, metadata={"version": version}
            )
        bare = {}
        for kind, version in NO_VERSION.items():
            bare[kind] = upstream = lab.fleet.add("none")
            metadata = {} if version is None else {"version": version}
            nacos.add_instance("user-app", "127.0.0.1", upstream.port, metadata=metadata)
        for n, (_, raw) in enumerate(UNUSABLE):
            nacos.add_instance("user-app", "127.0.0.1", 9100 + n, metadata={"version": "V1"})
            corrupt(nacos, 9100 + n, **raw)
        nul = lab.fleet.add("nul")
        nacos.add_instance("user-app", "127.0.0.1", nul.port, metadata={"version": "V1\x00"})
        nacos.add_instance("bad/name", "127.0.0.1", 9200, metadata={"version": "V1"})
        registry = Registry.objects.create(name="nacos", kind="nacos", base_url=nacos.url)
        yield nacos, registry, good, bare, nul


@pytest.mark.parametrize("consumer", consumers())
def test_every_kind_of_bad_registry_entry_leaves_each_gateway_routing_by_every_generation(
    lab, bad_registry, consumer
):
    nacos, registry, good, bare, _ = bad_registry
    summary = sync_registry(registry)
    registry.refresh_from_db()
    assert not registry.stale
    assert registry.skipped_instances == len(UNUSABLE) + 2 == len(summary.skipped)
    lab.policy(**SEED_RULES)
    process, name = start_consumer(lab, consumer)
    first = wait_until(lambda: (row := in_sync(lab, name)) and row["skipped"] == [] and row, 10,
                     "the first ack")["acked_generation"]  # fmt: skip
    every = {good["V1"].name, good["V2"].name, *(u.name for u in bare.values())}

    # Generation after generation, each acked in sync with nothing to skip:
    # gray on: PROD and GRAY by version, nothing for the instances without one;
    assert served(process, 6) == {good["V1"].name: 6}
    assert served(process, 6, gray="gray-996") == {good["V2"].name: 6}
    # (what the dashboard sent: the instances without a usable version as `null`)
    document = json.loads(Generation.objects.order_by("-number").first().content)
    assert "bad/name" not in document["services"]
    assert {i["port"]: i["version"] for i in document["services"]["user-app"]["instances"]} == {
        good["V1"].port: "V1",
        good["V2"].port: "V2",
        **{upstream.port: None for upstream in bare.values()},
    }
    # gray off: ALL reaches every instance, those without a version too;
    lab.policy(enabled=False)
    until_served_by(process, every, "ALL on every instance")
    wait_until(lambda: (row := in_sync(lab, name)) and row["skipped"] == [], 10, "the gray-off ack")
    # the registry's default version puts them in V1;
    lab.policy(enabled=True)
    response = httpx.patch(
        f"{lab.dashboard.url}/api/v1/registries/{registry.pk}/",
        json={"default_version": "V1"},
        headers=auth(lab.admin_token),
    )
    assert response.status_code == 200, response.text
    registry.refresh_from_db()
    sync_registry(registry)
    prod = {good["V1"].name, *(u.name for u in bare.values())}
    until_served_by(process, prod, "PROD on every V1 one")
    # an entry fixed in the registry comes into traffic with the next sync.
    fixed = lab.fleet.add("V2")
    corrupt(nacos, 9101, port=fixed.port, metadata={"version": "V2"})
    sync_registry(registry)
    gray = {good["V2"].name, fixed.name}
    until_served_by(process, gray, "GRAY on the fixed entry", gray="gray-996")
    final = wait_until(lambda: in_sync(lab, name), 10, "the last ack")
    assert final["skipped"] == [] and final["acked_generation"] > first
    registry.refresh_from_db()
    assert (
        "has a zone index" in registry.last_error and "contains a NUL byte" in registry.last_error
    )


def test_the_sdk_balancer_skips_each_bad_entry_and_follows_every_later_list(lab, bad_registry):
    """The SDK balancer reads the registry itself (no dashboard in between): it meets every
    bad entry raw, uses the rest, and follows each later list and version change."""
    nacos, _, good, bare, nul = bad_registry

    async def run():
        async with NamingClient(nacos.url) as registry:
            balancer = ServiceBalancer(registry, "user-app", prod="V1", gray="V2", refresh_s=0.1)
            await balancer.start()
            try:
                return await _follow(balancer, nacos, lab, good, bare, nul)
            finally:
                await balancer.aclose()

    asyncio.run(run())


async def _names(balancer, count: int, flag: str) -> set[str]:
    names = set()
    for _ in range(count):
        response = await balancer.request("GET", "/user-app/hello", flag=flag)
        assert response.status_code == 200
        names.add(response.json()["instance"])
    return names


async def _follow(balancer, nacos, lab, good, bare, nul) -> None:
    skipped = {entry.record.split("[")[1].split("#")[1]: entry.reason for entry in balancer.skipped}
    versions = {
        str(port): reason for port, reason in skipped.items() if reason.startswith("version: ")
    }
    assert versions == {
        str(bare["empty"].port): "version: '' is empty; it takes ALL traffic only",
        str(bare["blank"].port): "version: '   ' is empty; it takes ALL traffic only",
        str(bare["control"].port): "version: 'V1\\x01' contains control characters; it takes "
        "ALL traffic only",
        str(bare["too long"].port): f"version: '{'V' * 58}… is longer than 64 characters; it "
        "takes ALL traffic only",
        str(nul.port): "version: 'V1\\x00' contains control characters; it takes ALL traffic only",
    }
    unusable = {port: reason for port, reason in skipped.items() if port not in versions}
    assert unusable == {
        "abc": "port: 'abc' is not a port",
        "0": "port: 0 is not a port",
        "9102": "weight: nan is not a number from 0 to 10000",
        "9103": "weight: -1.0 is not a number from 0 to 10000",
        "9104": "host: None is not text",
        "9105": "host: 'fe80::1%eth0' has a zone index",
        "9106": "host: '10.0.0.1 ; x' is not an IP address or host name",
    }
    assert await _names(balancer, 6, "PROD") == {good["V1"].name}
    assert await _names(balancer, 6, "GRAY") == {good["V2"].name}
    every = {good["V1"].name, good["V2"].name, nul.name, *(u.name for u in bare.values())}
    assert await _names(balancer, 4 * len(every), "ALL") == every
    # Later lists and versions: a fixed entry comes in, a bad one is no longer listed.
    fixed = lab.fleet.add("V2")
    corrupt(nacos, 9101, port=fixed.port, metadata={"version": "V2"})
    await async_wait_until(
        lambda: not any(entry.reason.startswith("port: 0 ") for entry in balancer.skipped),
        what="a list read after the entry was fixed",
    )
    assert await _names(balancer, 8, "GRAY") == {good["V2"].name, fixed.name}
    balancer.set_versions("V2", "V1")
    assert await _names(balancer, 8, "PROD") == {good["V2"].name, fixed.name}
    assert await _names(balancer, 4, "GRAY") == {good["V1"].name}
