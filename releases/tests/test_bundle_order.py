"""A bundle's order from its members' `depends_on` (a service after those it calls), cycles
and unknown names refused, and the bundle's page and API warning when the calls the services
report go against the order."""

import time

import pytest

from call_graph import services as call_graph
from releases.models import Release, ReleaseBundle

pytestmark = pytest.mark.django_db

STEPS = [{"targeted": True}, {"percent": 100}]


@pytest.fixture
def three(fleet):
    """cart-app as well, V1 and V2 registered."""
    from registry_sync.models import Instance, Service

    cart = Service.objects.create(name="cart-app")
    for version in ("V1", "V2"):
        Instance.objects.create(service=cart, instance_id=f"cart-{version}", host="10.0.1.1",
                                port=7300 + int(version[1]), version=version)  # fmt: skip


def bundle(client, *members):
    body = {"name": "checkout", "releases": list(members), "steps": STEPS}
    return client.post("/api/v1/release-bundles/", body, format="json")


def member(service, *depends_on):
    return {"service": service, "to_version": "V2", "depends_on": list(depends_on)}


def calls(caller, callee, **fields):
    """As the SDK of `caller` reports them."""
    sample = {"caller": caller, "caller_version": "V1", "callee": callee,
              "callee_version": "V1", "lane": None, "ts": int(time.time()) - 30, "total": 40,
              "errors": 0, **fields}  # fmt: skip
    call_graph.record([sample])


def test_the_order_is_derived_from_depends_on(api, three):
    client = api("operator")
    # Listed callers first: user-app calls order-app and cart-app, cart-app calls order-app.
    made = bundle(
        client,
        member("user-app", "order-app", "cart-app"),
        member("cart-app", "order-app"),
        member("order-app"),
    )
    assert made.status_code == 201, made.json()
    releases = made.json()["releases"]
    assert [r["service"] for r in releases] == ["order-app", "cart-app", "user-app"]
    assert [r["depends_on"] for r in releases] == [[], ["order-app"], ["cart-app", "order-app"]]
    # Started in that order, rolled back in the reverse one.
    client.post(f"/api/v1/release-bundles/{made.json()['id']}/start/")
    started = Release.objects.order_by("events__at", "events__id").filter(events__kind="started")
    assert [r.service for r in started] == ["order-app", "cart-app", "user-app"]


def test_without_depends_on_the_listed_order_is_kept(api, three):
    made = bundle(api("operator"), member("user-app"), member("cart-app"), member("order-app"))
    assert [r["service"] for r in made.json()["releases"]] == ["user-app", "cart-app", "order-app"]


def test_a_cycle_and_an_unknown_service_are_refused_and_named(api, three):
    client = api("operator")
    cycle = bundle(
        client,
        member("user-app", "cart-app"),
        member("cart-app", "order-app"),
        member("order-app", "user-app"),
    )
    assert cycle.status_code == 400
    assert cycle.json() == {
        "releases": [
            "depends_on goes round in a cycle: cart-app → order-app → user-app → cart-app."
        ]
    }
    itself = bundle(client, member("user-app", "user-app"), member("order-app"))
    assert itself.json() == {"releases": ["depends_on goes round in a cycle: user-app → user-app."]}
    ghost = bundle(client, member("user-app", "ghost-app"), member("order-app"))
    assert ghost.status_code == 400
    assert ghost.json() == {
        "releases": ["user-app: depends_on: ghost-app is not a service of this bundle."]
    }
    assert not ReleaseBundle.objects.exists() and not Release.objects.exists()


def test_observed_calls_against_the_order_are_warned_of(api, fleet, client, make_user):
    operator = api("operator")
    # Listed in the wrong order, nothing declared: user-app (which calls order-app) first.
    made = bundle(operator, member("user-app"), member("order-app")).json()
    assert made["order_warnings"] == []
    calls("user-app", "order-app")
    calls("order-app", "stock-app")  # not a member: not the bundle's business
    warning = (
        "user-app calls order-app, but order-app is released after user-app: declare "
        "order-app in user-app's depends_on."
    )
    shown = operator.get(f"/api/v1/release-bundles/{made['id']}/").json()
    assert shown["order_warnings"] == [warning]
    make_user("vera", "viewer")
    client.login(username="vera", password="pw-for-tests")
    page = client.get(f"/releases/bundles/{made['id']}/").content.decode()
    assert 'id="bundle-order-warnings"' in page
    assert warning.replace("'", "&#x27;") in page

    # Declared: the order is right, and no warning.
    right = bundle(operator, member("user-app", "order-app"), member("order-app")).json()
    assert [r["service"] for r in right["releases"]] == ["order-app", "user-app"]
    assert right["order_warnings"] == []
    page = client.get(f"/releases/bundles/{right['id']}/").content.decode()
    assert 'id="bundle-order-warnings"' not in page


def test_an_observed_call_nobody_declared_is_warned_of_when_the_bundle_declares_some(api, three):
    made = bundle(
        api("operator"), member("order-app"), member("cart-app"), member("user-app", "cart-app")
    ).json()
    assert [r["service"] for r in made["releases"]] == ["order-app", "cart-app", "user-app"]
    calls("user-app", "order-app", caller_version="V2", lane="gray")
    calls("user-app", "cart-app")
    # Calls of more than a day ago are not held against it.
    calls("order-app", "user-app", ts=int(time.time()) - 2 * 86400)
    shown = api("viewer").get(f"/api/v1/release-bundles/{made['id']}/").json()
    assert shown["order_warnings"] == [
        "user-app calls order-app, which user-app's depends_on does not name."
    ]


def test_the_bundle_form_declares_depends_on_with_calls(client, make_user, three):
    make_user("otto", "operator")
    client.login(username="otto", password="pw-for-tests")
    form = {
        "bundle-name": "checkout",
        "bundle-releases": "user-app V2 calls order-app, cart-app\ncart-app V2\norder-app V2",
        "bundle-steps": "targeted, 100",
        "bundle-interval_s": "5",
        "bundle-min_requests": "50",
        "bundle-max_error_rate_increase": "1.0",
        "bundle-failures_tolerated": "1",
        "bundle-deadline_s": "600",
    }
    assert client.post("/releases/bundles/", form).status_code == 302
    ordered = Release.objects.order_by("position").values_list("service", "depends_on")
    assert list(ordered) == [
        ("cart-app", []),
        ("order-app", []),
        ("user-app", ["cart-app", "order-app"]),
    ]
    page = client.get(f"/releases/bundles/{ReleaseBundle.objects.get().pk}/").content.decode()
    assert "<td>cart-app, order-app</td>" in page
    cycle = {**form, "bundle-releases": "user-app V2 calls order-app\norder-app V2 calls user-app"}
    refused = client.post("/releases/bundles/", cycle)
    assert refused.status_code == 400
    assert "depends_on goes round in a cycle: order-app → user-app → order-app." in (
        refused.content.decode()
    )
