"""Issue 26, responsive layout: on a 390 px wide phone, logged in as admin with data like the
demo's, no page reachable from the navigation (nor a service, release, revision, bundle or
draft page) scrolls sideways; every navigation link is on the screen and leads to its page,
and Tab reaches every action button of a release."""

import time

import pytest
from playwright.sync_api import expect

from call_graph import services as call_graph
from demo.management.commands.demo_setup import DEMO_LANES, DEMO_POLICY
from gateways.models import Gateway
from metrics import rollups
from metrics.samples import Sample
from policy.change_control import DraftPending, set_protected
from policy.publishing import load_state
from policy.services import create_lane, set_service_versions, update_policy
from registry_sync.models import Instance, Service
from releases import services as releases
from releases.bundles import create_bundle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
STEPS = [{"targeted": True}, {"percent": 25}, {"percent": 100}]
ANALYSIS = {"interval_s": 300, "min_requests": 50}
# The element that sticks out furthest to the right (tag, id, classes, its right edge),
# leaving out those inside a box that scrolls or clips them (they widen only that box).
WIDEST = r"""() => {
  const clipped = el => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== 'visible') return true;
    }
    return false;
  };
  let widest = null, right = 0;
  for (const el of document.body.querySelectorAll('*')) {
    const edge = el.getBoundingClientRect().right;
    if (edge > right && !clipped(el)) { right = edge; widest = el; }
  }
  if (!widest) return 'nothing';
  const name = widest.tagName.toLowerCase() + (widest.id ? '#' + widest.id : '')
    + [...widest.classList].map(c => '.' + c).join('');
  const text = widest.textContent.replace(/\s+/g, ' ').trim().slice(0, 60);
  return `${name} (right edge ${Math.round(right)} px): ${text}`;
}"""


@pytest.fixture
def demo_data(transactional_db):
    """The demo's fleet and policy (user-app calls order-app, V1 prod, V2 gray, V3 in the
    lanes), a gateway, traffic and call edges, a running release, a bundle, and a draft
    waiting on a protected service; the revisions and audit entries they make."""
    for name in ("user-app", "order-app", "pay-app"):
        service = Service.objects.create(name=name)
        for n, version in enumerate(("V1", "V2", "V3")):
            Instance.objects.create(service=service, version=version, state=Instance.UP,
                                    instance_id=f"10.0.{n}.1#7201#DEFAULT#DEFAULT_GROUP@@{name}",
                                    host=f"10.0.{n}.1", port=7201)  # fmt: skip
    update_policy(DEMO_POLICY, partial=True, actor="demo-setup", source="api",
                  expected_revision=None)  # fmt: skip
    for lane, body in DEMO_LANES.items():
        create_lane(lane, body, actor="demo-setup", source="api", comment="Demo lane.")
    Gateway.objects.create_with_credentials(name="demo-gateway", mode=Gateway.PULL)
    now = int(time.time())
    rollups.add(
        [
            Sample(service, version, ts, 40, errors, 12.5, lane)
            for ts in range(now - 120, now, 10)
            for service in ("user-app", "order-app")
            for version, errors, lane in (("V1", 0, ""), ("V2", 1, "gray"), ("V3", 0, "feature-x"))
        ]
    )
    call_graph.record(
        [
            {
                "ts": now - 30,
                "caller": "user-app",
                "caller_version": version,
                "callee": "order-app",
                "callee_version": version,
                "lane": "",
                "total": 90,
                "errors": 1,
            }  # fmt: skip
            for version in ("V1", "V2")
        ]
    )
    release = releases.create_release(service="user-app", to_version="V2", from_version=None,
                                      steps=STEPS, analysis_settings=ANALYSIS, actor="admin",
                                      source="ui")  # fmt: skip
    releases.act(release.pk, "start", actor="admin", source="ui")
    releases.act(release.pk, "pause", actor="admin", source="ui")
    bundle = create_bundle(name="checkout", steps=STEPS, analysis_settings=ANALYSIS,
                           actor="admin", source="ui",
                           members=[{"service": "order-app", "to_version": "V3"},
                                    {"service": "pay-app", "to_version": "V2"}])  # fmt: skip
    set_protected(Service.objects.get(name="pay-app"), True, actor="admin", source="ui")
    with pytest.raises(DraftPending) as held:
        set_service_versions("pay-app", {"percent": 10}, actor="olga", source="ui",
                             comment="Ten percent of pay-app's traffic to V2.")  # fmt: skip
    return {
        "service": "/services/user-app/",
        "release": f"/releases/{release.pk}/",
        "revision": f"/revisions/{load_state().revision}/",
        "bundle": f"/releases/bundles/{bundle.pk}/",
        "draft": f"/drafts/{held.value.draft.pk}/",
    }


@pytest.fixture
def phone(page, demo_data, make_role_user, log_in):
    make_role_user("ada", "admin")
    log_in("ada")
    page.set_viewport_size(PHONE)
    return page


def nav_links(page) -> list[tuple[str, str]]:
    links = page.locator("header nav a")
    return [(a.text_content(), a.get_attribute("href")) for a in links.all()]


def too_wide(page, name: str) -> list[str]:
    """[] if the page fits the phone, else what is too wide."""
    page.wait_for_load_state("load")  # the stylesheet and the charts' scripts
    width = page.evaluate("document.documentElement.scrollWidth")
    if width <= PHONE["width"]:
        return []
    return [f"{name} is {width} px wide; widest: {page.evaluate(WIDEST)}"]


def test_every_page_fits_a_phone(phone, demo_data, screenshot):
    page = phone
    page.goto("/")
    links = nav_links(page)
    assert len(links) >= 10
    problems = []
    for text, href in links:
        page.goto(href)
        problems += too_wide(page, f"{text} ({href})")
        screenshot(f"phone-{href.strip('/').replace('/', '-') or 'overview'}")
    for name, url in demo_data.items():
        page.goto(url)
        problems += too_wide(page, f"the {name} page ({url})")
        screenshot(f"phone-{name}")
    page.goto("/api/docs/")  # the header's API link: Swagger UI, drawn once the schema is in
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    problems += too_wide(page, "the API docs (/api/docs/)")
    screenshot("phone-api")
    assert not problems, "\n".join(problems)


def test_the_navigation_is_reachable_on_a_phone(phone):
    page = phone
    page.goto("/")
    for text, href in nav_links(page):
        link = page.locator("header nav a", has_text=text)
        expect(link).to_be_in_viewport()
        with page.expect_navigation():
            link.click()
        assert page.url.endswith(href)
        expect(page.locator("header nav a.active")).to_have_text(text)


def test_tab_reaches_every_action_of_a_release_on_a_phone(phone, demo_data):
    page = phone
    page.goto(demo_data["release"])
    buttons = page.locator("#release-actions button:visible")
    expected = buttons.all_text_contents()
    assert {"Resume", "Rollback", "Abort"} <= set(expected)
    for button in buttons.all():  # on the screen, not scrolled away inside the card
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], button.text_content()
    reached = []
    for _ in range(200):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "document.activeElement.closest('#release-actions') ? "
            "document.activeElement.textContent : null"
        )
        if focused:
            reached.append(focused)
        if reached and reached[-1] == expected[-1]:
            break
    assert reached == expected
