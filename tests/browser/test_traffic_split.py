"""The traffic split and a quarantine in a real browser, on a phone's width (390 px): the bars
drawn (under the Content-Security-Policy, which the `page` fixture holds the page to), the
split inside the screen, and the quarantine lifted with the button, confirmed."""

import time

import pytest
from playwright.sync_api import expect

from metrics import rollups
from metrics.samples import Sample
from policy.services import create_lane, quarantine_version
from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def fleet(transactional_db):
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(["V1", "V2", "V3"]):
        Instance.objects.create(service=service, instance_id=f"i{n}", host=f"10.0.0.{n}",
                                port=7201, version=version, state="UP")  # fmt: skip
    create_lane("feature-x", {"priority": 100, "members": {"user-app": "V3"}}, actor="t",
                source="api")  # fmt: skip
    ts = int(time.time()) - 2
    rollups.add(
        [
            Sample("user-app", "V1", ts, 640, 0, 5.0),
            Sample("user-app", "V1", ts, 40, 0, 5.0, "feature-x"),
            Sample("user-app", "V2", ts, 250, 3, 5.0, "gray"),
            Sample("user-app", "V3", ts, 70, 0, 5.0, "feature-x"),
        ]
    )
    release = Release.objects.create(
        service="user-app", from_version="V1", to_version="V2", state="rolled_back",
        steps=[{"percent": 100}], analysis={},
    )  # fmt: skip
    quarantine_version("user-app", "V2", actor="release", source="release")
    return release


def right_edge(locator) -> float:
    box = locator.bounding_box()
    return box["x"] + box["width"]


def test_the_split_fits_a_phone_and_the_quarantine_lifts(
    page, fleet, make_role_user, log_in, screenshot
):
    make_role_user("olga", "operator")
    log_in("olga")
    page.set_viewport_size(PHONE)
    page.goto("/services/user-app/")
    split = page.locator("#traffic-split")
    expect(split.locator('[data-split="versions"] li')).to_have_text(
        ["V1 68 %", "V2 25 %", "V3 7 %"]
    )
    expect(split.locator('[data-split="lanes"] li')).to_have_text(
        ["no lane 64 %", "gray 25 %", "feature-x 11 %"]
    )
    for bar in split.locator("svg.split-bar").all():
        assert bar.bounding_box()["width"] > 200
        assert right_edge(bar) <= PHONE["width"]
    # The rectangles take the bar's width in their shares (the SVG is stretched to the bar).
    bar = split.locator('[data-split="versions"] svg').bounding_box()["width"]
    v1 = split.locator('[data-split="versions"] rect').first.bounding_box()["width"]
    assert v1 == pytest.approx(bar * 0.68, abs=1.5)
    for item in split.locator("li").all():
        assert right_edge(item) <= PHONE["width"]
    quarantine = page.locator("#quarantine")
    expect(quarantine).to_contain_text(f"V2 quarantined (release {fleet.pk} rolled back)")
    assert right_edge(quarantine.get_by_role("button", name="Lift quarantine")) <= PHONE["width"]
    screenshot("traffic-split-phone")

    page.goto("/")
    cell = page.locator('tr[data-service="user-app"] [data-field="split"]')
    expect(cell.locator('[data-split="versions"] li')).to_have_text(
        ["V1 68 %", "V2 25 %", "V3 7 %"]
    )
    expect(cell.locator('[data-split="lanes"] li[data-name]')).to_have_text(
        ["gray 25 %", "feature-x 11 %"]
    )
    assert cell.locator("svg").first.bounding_box()["width"] <= 160
    assert cell.locator(".split").bounding_box()["width"] <= 240
    expect(page.locator('tr[data-service="user-app"] [data-field="quarantined"]')).to_have_text(
        "V2 quarantined"
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot("traffic-split-overview")

    page.goto("/services/user-app/")
    messages = []
    page.on("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    with page.expect_navigation():
        page.get_by_role("button", name="Lift quarantine").click()
    assert messages and "Lift the quarantine of V2 of user-app?" in messages[0]
    expect(page.locator(".flash-success")).to_contain_text("V2 of user-app is out of quarantine")
    expect(page.locator("#quarantine")).to_have_count(0)
