"""Call edges from the service SDK (dataplane/sdk/call_edges.py) to a real dashboard: the demo
user-app (the SDK's balancer, with the fleet's service token) calls order-app over loopback
and reports each edge with its versions and lane, periodically and at shutdown; a reporter
whose post fails keeps its counts for the next one, within its bound."""

import asyncio

import httpx
import pytest

from dataplane.sdk.call_edges import CallEdgeReporter
from testing.demo_processes import DemoInstance, fresh_dashboard, manage
from testing.processes import free_port
from testing.waiting import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sdk-call-edges")


@pytest.fixture(scope="module")
def dashboard(var_dir):
    with fresh_dashboard(var_dir) as server:
        yield server


@pytest.fixture(scope="module")
def fleet_token(var_dir, dashboard):
    """The demo fleet's `service` token (demo_setup writes it)."""
    return (var_dir / "demo-fleet.token").read_text().strip()


@pytest.fixture(scope="module")
def viewer(var_dir, dashboard):
    token = manage(var_dir, "issue_token", "vera", "--role", "viewer").strip().splitlines()[-1]
    with httpx.Client(base_url=dashboard.url, headers={"Authorization": f"Token {token}"}) as api:
        yield api


def edges(viewer, caller: str) -> dict[tuple, tuple[int, int]]:
    """(caller_version, callee, callee_version, lane) -> (total, errors), all minutes added."""
    found: dict[tuple, tuple[int, int]] = {}
    for row in viewer.get("/api/v1/call-edges/", params={"service": caller}).json()["results"]:
        key = (row["caller_version"], row["callee"], row["callee_version"], row["lane"])
        total, errors = found.get(key, (0, 0))
        found[key] = (total + row["total"], errors + row["errors"])
    return found


def hello(instance, flag: str, lane: str | None = None) -> dict:
    headers = {"X-Gray-Status": flag, **({"X-Gray-Lane": lane} if lane else {})}
    url = f"{instance.url}/{instance.service}/hello"
    return httpx.get(url, headers=headers, timeout=5).json()


def test_the_sdk_reports_the_calls_it_makes_periodically_and_at_shutdown(
    dashboard, fleet_token, viewer
):
    order_v1 = DemoInstance(dashboard.url, "order-app", "V1")
    order_v2 = DemoInstance(dashboard.url, "order-app", "V2")
    user_app = DemoInstance(
        dashboard.url, "user-app", "V1", "--downstream", "order-app", "--drain-s", "1",
        token=fleet_token,
    )  # fmt: skip
    feature_x = ("V1", "order-app", "V1", "feature-x")
    with order_v1, order_v2:
        user_app.start()
        try:
            # Its balancer sees both order-app versions once they registered.
            wait_until(lambda: hello(user_app, "GRAY")["downstream"].get("version") == "V2")
            wait_until(lambda: hello(user_app, "PROD")["downstream"].get("version") == "V1")
            # Calls for requests of lane feature-x (which asks order-app for prod): only these.
            for _ in range(2):
                assert hello(user_app, "GRAY", "feature-x")["downstream"]["version"] == "V1"
            # Sent in the background every 10 s, with the calls made while it warmed up and
            # above: gray ones to V2 in lane gray, prod ones to V1 in none.
            reported = wait_until(
                lambda: (found := edges(viewer, "user-app")).get(feature_x) == (2, 0) and found,
                timeout=30,
            )
            assert reported[("V1", "order-app", "V2", "gray")][0] >= 1
            assert reported[("V1", "order-app", "V1", None)][0] >= 1
            assert all(errors == 0 for _, errors in reported.values())
            for _ in range(3):
                hello(user_app, "GRAY", "feature-x")
        finally:
            user_app.stop()  # SIGTERM: drained, and what is counted is sent on the way out
    assert edges(viewer, "user-app")[feature_x] == (5, 0)


def test_counts_a_post_could_not_deliver_are_sent_the_next_time_within_the_bound(
    dashboard, fleet_token, viewer
):
    async def report() -> CallEdgeReporter:
        reporter = CallEdgeReporter(
            f"http://127.0.0.1:{free_port()}",  # nobody listens there
            fleet_token,
            service="cart-app",
            version="V3",
            max_edges=2,
        )
        for _ in range(4):
            reporter.count("stock-app", "V1", None, error=False)
        reporter.count("stock-app", "V2", "gray", error=True)
        reporter.count("stock-app", "V9", "gray", error=True)  # a third edge: over the bound
        assert not await reporter.send()
        # The dashboard answers from now on (elsewhere: a new client for its URL).
        assert reporter._http is not None
        await reporter._http.aclose()
        reporter._http, reporter.dashboards = None, (dashboard.url,)
        await reporter.aclose()  # the kept counts go with the last post
        return reporter

    reporter = asyncio.run(report())
    assert reporter.dropped == 1
    assert edges(viewer, "cart-app") == {
        ("V3", "stock-app", "V1", None): (4, 0),
        ("V3", "stock-app", "V2", "gray"): (1, 1),
    }
