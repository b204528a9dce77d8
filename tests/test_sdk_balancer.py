"""dataplane/sdk/balancer.py: instances from a Nacos registry (the contract fake, over HTTP),
real upstream servers on loopback (testing/gateway_lab.py's), picked by the request's flag
with the gateway's engine."""

from collections import Counter

import pytest

from dataplane.registry_client import NamingClient
from dataplane.sdk.balancer import NoInstance, ServiceBalancer
from dataplane.sdk.flag import Route, use_flag, use_route
from testing.fakes.nacos_fake import FakeNacos
from testing.gateway_lab import OK, SHUTTING_DOWN, UpstreamFleet
from testing.waiting import async_wait_until

pytestmark = pytest.mark.asyncio


@pytest.fixture
def world():
    with FakeNacos() as nacos, UpstreamFleet() as fleet:
        yield nacos, fleet


def register(nacos, upstream, **fields):
    nacos.add_instance(
        "order-app", "127.0.0.1", upstream.port, metadata={"version": upstream.version}, **fields
    )


async def served_by(balancer, count: int, flag: str | None = None, route=None) -> Counter:
    seen = Counter()
    for _ in range(count):
        response = await balancer.request("GET", "/order-app/hello", flag=flag, route=route)
        assert response.status_code == 200
        seen[response.json()["instance"]] += 1
    return seen


async def test_the_flag_picks_the_version_and_goes_on_in_the_header(world):
    nacos, fleet = world
    v1a, v1b, v2 = fleet.add("V1"), fleet.add("V1"), fleet.add("V2")
    for upstream in (v1a, v1b, v2):
        register(nacos, upstream)
    async with NamingClient(nacos.url) as registry:
        balancer = ServiceBalancer(registry, "order-app", prod="V1", gray="V2")
        await balancer.start()
        try:
            with use_flag("GRAY"):  # the flag of the request being served
                assert await served_by(balancer, 4) == {v2.name: 4}
            assert await served_by(balancer, 4, "PROD") == {v1a.name: 2, v1b.name: 2}
            assert set(await served_by(balancer, 6, "ALL")) == {v1a.name, v1b.name, v2.name}
        finally:
            await balancer.aclose()
    assert v2.received[0].headers["x-gray-status"] == "GRAY"
    assert v2.received[0].headers["baggage"] == "graylane.gray=GRAY"
    assert v1a.received[0].headers["x-gray-status"] == "PROD"


async def test_unhealthy_and_disabled_instances_get_nothing_gray_falls_back(world):
    nacos, fleet = world
    good, sick, off = fleet.add("V1"), fleet.add("V1"), fleet.add("V2")
    register(nacos, good)
    register(nacos, sick, healthy=False)
    register(nacos, off, enabled=False)
    async with NamingClient(nacos.url) as registry:
        balancer = ServiceBalancer(registry, "order-app", prod="V1", gray="V2")
        await balancer.start()
        try:
            assert await served_by(balancer, 4, "PROD") == {good.name: 4}
            # No routable V2: GRAY falls back to prod; without fallback, nothing is left.
            assert await served_by(balancer, 2, "GRAY") == {good.name: 2}
            balancer.fallback_to_prod = False
            with pytest.raises(NoInstance):
                await balancer.request("GET", "/order-app/hello", flag="GRAY")
        finally:
            await balancer.aclose()
    assert not sick.received and not off.received


async def test_the_shutting_down_marker_and_a_refused_connection_move_the_request_on(world):
    nacos, fleet = world
    leaving, staying = fleet.add("V1", SHUTTING_DOWN), fleet.add("V1", OK)
    register(nacos, leaving)
    register(nacos, staying)
    nacos.add_instance("order-app", "127.0.0.1", 9, metadata={"version": "V1"})  # nobody
    async with NamingClient(nacos.url) as registry:
        balancer = ServiceBalancer(registry, "order-app", refresh_s=60)
        await balancer.start()
        try:
            assert await served_by(balancer, 6, "PROD") == {staying.name: 6}
        finally:
            await balancer.aclose()
    # The leaving one was asked once, then avoided; the request it refused went elsewhere.
    assert len(leaving.received) == 1


async def test_a_failing_registry_leaves_the_last_list_in_use_and_refreshes_in_the_background(
    world,
):
    nacos, fleet = world
    first = fleet.add("V1")
    register(nacos, first)
    async with NamingClient(nacos.url) as registry:
        balancer = ServiceBalancer(registry, "order-app", refresh_s=0.1)
        await balancer.start()
        try:
            nacos.fail_with(500)
            await async_wait_until(lambda: balancer.stale, what="a refresh to fail")
            assert await served_by(balancer, 2, "PROD") == {first.name: 2}
            second = fleet.add("V1")
            register(nacos, second)
            nacos.fail_with(None)
            await async_wait_until(lambda: not balancer.stale, what="a refresh to work again")
            assert set(await served_by(balancer, 4, "PROD")) == {first.name, second.name}
        finally:
            await balancer.aclose()


async def test_a_route_asks_what_its_versions_say_and_never_a_quarantined_version(world):
    nacos, fleet = world
    v1, v2, v3 = fleet.add("V1"), fleet.add("V2"), fleet.add("V3")
    for upstream in (v1, v2, v3):
        register(nacos, upstream)
    versions = "*=V1,order-app=V3/V1,!order-app=V2"
    async with NamingClient(nacos.url) as registry:
        balancer = ServiceBalancer(registry, "order-app", prod="V1", gray="V2", refresh_s=0.1)
        await balancer.start()
        try:
            with use_route(Route("GRAY", "feature-x", versions)):
                assert await served_by(balancer, 3) == {v3.name: 3}
            # Any version for ALL, but the quarantined one.
            with use_route(Route("ALL", None, "!order-app=V2")):
                assert await served_by(balancer, 4) == {v1.name: 2, v3.name: 2}
            # Without the versions a hop knows its own gray version only: another lane
            # asks for prod, never the gray lane's version (nor any lane's).
            assert await served_by(balancer, 2, route=Route("GRAY", "feature-x")) == {v1.name: 2}
            assert await served_by(balancer, 2, route=Route("GRAY", "gray")) == {v2.name: 2}
            # The lane's version gone: its prod fallback.
            nacos.remove_instance("order-app", "127.0.0.1", v3.port)
            await async_wait_until(
                lambda: all(i.port != v3.port for i in balancer.instances),
                what="the balancer to read the list without V3",
            )
            with use_route(Route("GRAY", "feature-x", versions)):
                assert await served_by(balancer, 2) == {v1.name: 2}
        finally:
            await balancer.aclose()
    sent = v3.received[0].headers
    assert (sent["x-gray-status"], sent["x-gray-lane"], sent["x-gray-versions"]) == (
        "GRAY",
        "feature-x",
        versions,
    )
    assert sent["baggage"] == "graylane.gray=GRAY,graylane.lane=feature-x"
