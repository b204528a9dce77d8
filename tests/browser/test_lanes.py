"""Issue 22, the UI: an operator creates a lane on the Lanes page, previews and publishes it,
and the routing moves: the simulator, through its page, puts a matching request in the new
lane and answers the lane's versions at each hop, where it answered prod before. The pages
also fit a 390 px wide phone without scrolling sideways."""

import json
import re

import pytest
from playwright.sync_api import expect

from gateways import generation, yaml_layout
from gateways.acks import record_acks
from gateways.models import Gateway, Generation
from policy.lanes import lanes_of
from policy.publishing import load_state
from policy.services import create_lane, update_policy
from registry_sync.models import Instance, Service

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def fleet(transactional_db):
    """The demo's two services with a V3 of each beside V1 and V2, and the reference
    design's header rule, routing on."""
    for name, versions in {"user-app": ("V1", "V2", "V3"), "order-app": ("V1", "V2", "V3")}.items():
        service = Service.objects.create(name=name)
        for index, version in enumerate(versions):
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host=f"10.0.{index}.1", port=7201, version=version,
                                    state=Instance.UP)  # fmt: skip
    update_policy(
        {"enabled": True, "routing": True, "header": {"name": "gray", "value": "gray-996"}},
        partial=True, actor="seed", source="api", expected_revision=None,
    )  # fmt: skip


@pytest.fixture
def operator_page(page, make_role_user, log_in):
    make_role_user("olga", "operator")
    log_in("olga")
    return page


def simulate_feature_x(page):
    """Through the simulator's page: a request with `x-lane: feature-x` entering at user-app,
    which calls order-app."""
    page.goto("/simulate/")
    form = page.locator("#simulate-form")
    form.locator("[name=path]").fill("user-app, order-app")
    form.locator("[name=header_name]").fill("x-lane")
    form.locator("[name=header_value]").fill("feature-x")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    return page.locator("#simulation-result")


def hops(result):
    return [
        re.sub(r"\s+", " ", row).strip() for row in result.locator("tr[data-hop]").all_inner_texts()
    ]


def test_create_a_lane_publish_it_and_see_the_routing_move(
    operator_page, fleet, live_server, screenshot
):
    page = operator_page
    # Before: nothing puts the request in a lane; prod at both hops.
    result = simulate_feature_x(page)
    expect(result.locator(".flag")).to_have_text("PROD")
    assert hops(result) == [
        "1 user-app V1 no none prod version",
        "2 order-app V1 no none prod version",
    ]

    page.click("nav >> text=Lanes")
    expect(page.locator("h1")).to_have_text("Lanes")
    expect(page.locator("#lanes > li")).to_have_count(1)
    expect(page.locator("#lane-gray")).to_contain_text("built-in")
    page.click("#new-lane")
    expect(page.locator("h1")).to_have_text("New lane")
    page.fill("#id_name", "feature-x")
    page.fill("#id_header_name", "x-lane")
    page.fill("#id_header_value", "feature-x")
    # Each member row's version suggests the versions of the service chosen in that row.
    page.fill("#id_members-0-service", "user-app")
    expect(page.locator("#id_members-0-version")).to_have_attribute("list", "versions-1")
    options = page.locator("#versions-1 option")
    expect(options).to_have_count(3)
    assert options.evaluate_all("o => o.map(x => x.value)") == ["V1", "V2", "V3"]
    page.fill("#id_members-0-version", "V3")
    page.fill("#id_members-1-service", "order-app")
    expect(page.locator("#id_members-1-version")).to_have_attribute("list", "versions-0")
    page.fill("#id_members-1-version", "V4")  # a typo: no instance of it
    page.fill("#id_comment", "Testers of V3")
    live = load_state().revision
    with page.expect_navigation():
        page.click("#preview-button")
    expect(page.locator(".field-error")).to_have_count(0)
    expect(page.locator("table.diff")).to_contain_text("members.user-app.version")
    # The preview shows the lane as stored: members in order, order-app's V4 flagged.
    expect(page.locator("#id_members-0-service")).to_have_value("order-app")
    member = page.locator("fieldset.member").first
    expect(member.locator(".member-flag")).to_contain_text("no instance")
    screenshot("lane-preview")
    page.fill("#id_members-0-version", "V3")
    with page.expect_navigation():
        page.click("#preview-button")
    expect(page.locator(".member-flag")).to_have_count(0)
    expect(page.locator("#save-button")).to_have_text(f"Publish revision {live + 1}")
    assert load_state().revision == live  # a preview publishes nothing

    page.click("#save-button")
    expect(page).to_have_url(f"{live_server.url}/revisions/{live + 1}/")
    expect(page.locator(".flash-success")).to_have_text(f"Published revision {live + 1}.")
    lane = lanes_of(load_state().document)["feature-x"]
    assert lane["members"] == {
        "order-app": {"version": "V3", "percent": 0, "targeted": True},
        "user-app": {"version": "V3", "percent": 0, "targeted": True},
    }

    page.click("nav >> text=Lanes")
    expect(page.locator("#lanes > li")).to_have_count(2)
    card = page.locator("#lane-feature-x")
    expect(card.locator(".lane-position")).to_have_text("1")
    expect(card).to_contain_text("header x-lane: feature-x")
    expect(page.locator("#lane-gray .lane-position")).to_have_text("2")
    screenshot("lanes")

    # After: the same request is in the lane, and gets V3 at both hops.
    result = simulate_feature_x(page)
    expect(result.locator(".flag")).to_have_text("GRAY")
    expect(result.locator("#lane")).to_have_text("feature-x")
    expect(result.locator("#matched")).to_have_text("header")
    assert hops(result) == [
        "1 user-app V3 no in lane feature-x member version V3",
        "2 order-app V3 no in lane feature-x member version V3",
    ]
    screenshot("simulator-lane")

    # Deleted through its page (previewed as a diff first), the request is back in prod.
    page.goto("/lanes/feature-x/edit/")
    page.click("#delete-lane")
    expect(page.locator("table.diff")).to_contain_text("members.order-app.version")
    screenshot("lane-delete")
    with page.expect_navigation():
        page.click("#delete-button")
    expect(page.locator(".flash-success")).to_have_text(f"Published revision {live + 2}.")
    result = simulate_feature_x(page)
    expect(result.locator(".flag")).to_have_text("PROD")


def test_gateways_that_cannot_carry_a_lane_are_shown(operator_page, fleet, screenshot):
    """A Nacos-mode gateway acks the lane as skipped: the lane's page and the gateways page
    say so."""
    page = operator_page
    create_lane("feature-x", {"priority": 100, "members": {"user-app": "V3"}}, actor="bob",
                source="api")  # fmt: skip
    number = generation.bump("lanes")
    document = json.loads(Generation.objects.get(number=number).content)
    nacos, _, _ = Gateway.objects.create_with_credentials(
        name="gw-nacos", mode=Gateway.NACOS, endpoint="http://127.0.0.1:8848/nacos"
    )
    record_acks({nacos.pk: number}, delivered=True,
                skipped={nacos.pk: yaml_layout.left_out(document)})  # fmt: skip
    page.goto("/lanes/feature-x/edit/")
    expect(page.locator("#lane-unreachable")).to_contain_text("No request enters this lane")
    expect(page.locator("#lane-gateways")).to_contain_text("gw-nacos cannot carry it")
    screenshot("lane-gateways")
    page.click("nav >> text=Gateways")
    skipped = page.locator('tr[data-gateway="gw-nacos"] [data-field="skipped"]')
    expect(skipped).to_contain_text("cannot carry lane feature-x: a Nacos-mode gateway")
    screenshot("gateways-lanes")
    skipped.locator("a", has_text="feature-x").click()
    expect(page).to_have_url(re.compile(r"/lanes/#lane-feature-x$"))
    expect(page.locator("#lane-feature-x")).to_contain_text("gw-nacos cannot carry it")


def scrolls_sideways(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth > window.innerWidth")


def test_the_lanes_pages_fit_a_phone(operator_page, fleet, screenshot):
    """390 px wide: the list, the editor (with an error shown) and the simulator's hops."""
    page = operator_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/lanes/new/")
    page.fill("#id_name", "Feature X")
    page.fill("#id_members-0-service", "user-app")
    with page.expect_navigation():
        page.click("#preview-button")
    expect(page.locator("#form-errors")).to_be_visible()
    assert not scrolls_sideways(page), "the lane editor scrolls sideways"
    screenshot("lane-editor-390")
    page.fill("#id_name", "feature-x")
    page.fill("#id_members-0-version", "V3")
    with page.expect_navigation():
        page.click("#preview-button")
    with page.expect_navigation():
        page.click("#save-button")
    page.goto("/lanes/")
    assert not scrolls_sideways(page), "the lanes page scrolls sideways"
    screenshot("lanes-390")
    page.goto("/lanes/gray/edit/")
    assert not scrolls_sideways(page), "the gray lane's page scrolls sideways"
    simulate_feature_x(page)
    expect(page.locator("tr[data-hop]")).to_have_count(2)
    assert not scrolls_sideways(page), "the simulator scrolls sideways"
    screenshot("simulator-390")
