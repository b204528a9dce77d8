"""Issue 26, responsive layout: on a 390 px wide phone, logged in as admin with data like the
demo's, no page reachable from the navigation (nor a service, release, revision, bundle, lane
or draft page) scrolls sideways; every navigation link is on the screen and leads to its page,
and Tab reaches every action button of each of those pages, on the screen."""

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHONE = {"width": 390, "height": 844}
# Marks each action of the page that a person can see and use (a button, or a link that looks
# like one; not one inside a closed <details>: Tab reaches its summary) with
# data-tab-probe="<its index>"; returns their names in that order.
MARK_ACTIONS = r"""() => {
  const actions = [...document.querySelectorAll(
      'button, input[type=submit], input[type=button], [role=button], a.button')]
    .filter(el => !el.disabled && el.checkVisibility({visibilityProperty: true}));
  actions.forEach((el, i) => { el.dataset.tabProbe = i; });
  return actions.map(el => (el.value || el.textContent).replace(/\s+/g, ' ').trim()
    || el.getAttribute('aria-label') || el.outerHTML.slice(0, 80));
}"""
# What has the keyboard's focus: null for the page itself, else its probe index (null for
# other things that take focus: links, fields) and whether it is wholly across the screen.
FOCUSED = r"""() => {
  const el = document.activeElement;
  if (!el || el === document.body || el === document.documentElement) return null;
  const box = el.getBoundingClientRect();
  return {probe: el.dataset.tabProbe ?? null,
          onScreen: box.left >= 0 && box.right <= innerWidth && box.bottom > 0
            && box.top < innerHeight};
}"""
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
def phone(page, admin_pages):
    page.set_viewport_size(PHONE)
    return page


def too_wide(page, name: str) -> list[str]:
    """[] if the page fits the phone, else what is too wide."""
    page.wait_for_load_state("load")  # the stylesheet and the charts' scripts
    width = page.evaluate("document.documentElement.scrollWidth")
    if width <= PHONE["width"]:
        return []
    return [f"{name} is {width} px wide; widest: {page.evaluate(WIDEST)}"]


def unreachable_by_tab(page, name: str) -> tuple[list[str], list[str]]:
    """The page's actions, and what is wrong: an action that Tab does not reach, or that is
    not on the screen when it has the focus."""
    page.wait_for_load_state("load")  # the scripts that add or enable buttons
    actions = page.evaluate(MARK_ACTIONS)
    reached: set[int] = set()
    problems = []
    started = False
    # Tab goes through everything that takes focus once, then back to the page itself.
    for _ in range(
        len(actions) + page.locator("a, input, select, textarea, [tabindex]").count() + 5
    ):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None:
            if started:
                break
            continue
        started = True
        if focused["probe"] is None:
            continue
        index = int(focused["probe"])
        if index in reached:
            break
        reached.add(index)
        if not focused["onScreen"]:
            problems.append(f"{name}: {actions[index]!r} has the focus out of sight")
        if len(reached) == len(actions):
            break
    problems += [
        f"{name}: Tab does not reach {action!r}"
        for index, action in enumerate(actions)
        if index not in reached
    ]
    return actions, problems


def test_every_page_fits_a_phone(phone, admin_pages, screenshot):
    page = phone
    problems = []
    for name, url in admin_pages:
        page.goto(url)
        problems += too_wide(page, f"{name} ({url})")
        screenshot("phone-" + re.sub(r"\W+", "-", name.lower()))
    page.goto("/api/docs/")  # the header's API link: Swagger UI, drawn once the schema is in
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    problems += too_wide(page, "the API docs (/api/docs/)")
    screenshot("phone-api")
    assert not problems, "\n".join(problems)


def test_the_navigation_is_reachable_on_a_phone(phone, admin_pages):
    page = phone
    page.goto("/")
    links = page.locator("header nav a")
    assert links.count() >= 10
    for link in links.all():
        text, href = link.text_content(), link.get_attribute("href")
        expect(link).to_be_in_viewport()
        with page.expect_navigation():
            link.click()
        assert page.url.endswith(href)
        expect(page.locator("header nav a.active")).to_have_text(text)


def test_tab_reaches_every_action_on_a_phone(phone, admin_pages, demo_data):
    page = phone
    problems = []
    for name, url in admin_pages:
        page.goto(url)
        actions, unreachable = unreachable_by_tab(page, f"{name} ({url})")
        problems += unreachable
        if url == demo_data["release"]:
            assert {"Resume", "Rollback", "Abort"} <= set(actions), actions
    assert not problems, "\n".join(problems)
