import re

import pytest
from playwright.sync_api import expect

from policy.publishing import load_state
from policy.services import update_policy

pytestmark = pytest.mark.browser


@pytest.fixture
def operator_page(page, make_role_user, log_in):
    make_role_user("olga", "operator")
    log_in("olga")
    return page


def ip_field(page):
    return page.locator(".field", has=page.locator("#id_ips"))


def diff_row(page, field):
    return page.locator("table.diff tbody tr", has=page.locator("code", has_text=field))


def test_bad_ip_is_rejected_inline_then_fixed_previewed_and_published(
    operator_page, live_server, screenshot
):
    page = operator_page
    live = load_state().revision

    page.goto("/policy/")
    expect(page.locator(".page-head")).to_contain_text(f"live is revision {live}")
    page.fill("#id_ips", "10.1.0.0/16\n10.1.2.3/16\n192.0.2.7")
    with page.expect_navigation() as navigation:
        page.click("#preview-button")
    assert navigation.value.status == 400

    expect(page.locator("#form-errors")).to_have_text(
        "Nothing was saved: fix the fields marked below."
    )
    expect(ip_field(page).locator(".field-error")).to_have_text(
        "'10.1.2.3/16' has host bits set; did you mean 10.1.0.0/16?"
    )
    # Only the IP field is marked, the text typed is kept, and nothing can be published.
    expect(page.locator(".field-error")).to_have_count(1)
    expect(page.locator("#id_ips")).to_have_value("10.1.0.0/16\n10.1.2.3/16\n192.0.2.7")
    expect(page.locator("#save-button")).to_have_count(0)
    expect(page.locator("table.diff")).to_have_count(0)
    assert load_state().revision == live
    screenshot("policy-error")

    page.fill("#id_ips", "10.1.0.0/16\n192.0.2.7")
    page.fill("#id_comment", "Office networks")
    with page.expect_navigation() as navigation:
        page.click("#preview-button")
    assert navigation.value.status == 200
    expect(page.locator(".field-error")).to_have_count(0)
    ips = diff_row(page, "ips")
    expect(ips.locator("td.added div")).to_have_text(['+ "10.1.0.0/16"', '+ "192.0.2.7"'])
    expect(page.locator("table.diff tbody tr")).to_have_count(1)
    expect(page.locator("#save-button")).to_have_text(f"Publish revision {live + 1}")
    assert load_state().revision == live  # a preview publishes nothing
    screenshot("policy-preview")

    page.click("#save-button")
    expect(page).to_have_url(f"{live_server.url}/revisions/{live + 1}/")
    expect(page.locator(".flash-success")).to_have_text(f"Published revision {live + 1}.")
    expect(page.locator("h1")).to_contain_text(f"Revision {live + 1}")
    expect(page.locator("h1 .pill")).to_have_text("live")
    expect(page.locator(".comment")).to_contain_text("Office networks")
    expect(diff_row(page, "ips").locator("td.added div")).to_have_text(
        ['+ "10.1.0.0/16"', '+ "192.0.2.7"']
    )
    screenshot("revision")

    page.click("nav >> text=Revisions")
    newest = page.locator("#revisions tbody tr").first
    expect(newest.locator("td").first).to_have_text(f"{live + 1} live")
    expect(newest).to_contain_text("olga")
    expect(newest).to_contain_text("Office networks")

    state = load_state()
    assert state.revision == live + 1
    assert state.document["gray"]["ips"] == ["10.1.0.0/16", "192.0.2.7"]


def test_a_change_published_meanwhile_gives_a_conflict_and_is_not_lost(operator_page, screenshot):
    page = operator_page
    page.goto("/policy/")
    live = load_state().revision
    page.fill("#id_ips", "10.9.0.0/16")
    page.click("#preview-button")
    expect(page.locator("#save-button")).to_have_text(f"Publish revision {live + 1}")

    # Behind the browser's back, someone else publishes first.
    update_policy(
        {"cities": ["hangzhou"]}, partial=True, actor="bob", source="api", expected_revision=None
    )

    with page.expect_navigation() as navigation:
        page.click("#save-button")
    assert navigation.value.status == 409
    conflict = page.locator("#conflict")
    expect(conflict).to_be_visible()
    expect(conflict).to_contain_text("Someone else saved first.")
    expect(conflict).to_contain_text(f"bob published revision {live + 1}")
    # Nothing of the operator's was saved, and bob's change is still live.
    state = load_state()
    assert state.revision == live + 1
    assert state.document["gray"]["cities"] == ["hangzhou"]
    assert state.document["gray"]["ips"] == []
    # The operator's edit is re-applied on top of bob's revision: bob's city stays in the
    # form, the diff shows only the operator's addition, and publishing keeps both.
    expect(page.locator("#id_ips")).to_have_value("10.9.0.0/16")
    expect(page.locator("#id_cities")).to_have_value("hangzhou")
    expect(page.locator(".page-head")).to_contain_text(f"live is revision {live + 1}")
    expect(diff_row(page, "ips").locator("td.added")).to_have_text('+ "10.9.0.0/16"')
    expect(diff_row(page, "cities")).to_have_count(0)
    expect(page.locator("#save-button")).to_have_text(f"Publish revision {live + 2}")
    screenshot("policy-conflict")
    page.click("#save-button")
    expect(page).to_have_url(re.compile(rf"/revisions/{live + 2}/$"))
    final = load_state().document["gray"]
    assert (final["cities"], final["ips"]) == (["hangzhou"], ["10.9.0.0/16"])


def test_a_viewer_sees_the_policy_read_only(page, make_role_user, log_in):
    make_role_user("vera", "viewer")
    log_in("vera")
    page.goto("/policy/")
    expect(page.locator("h1")).to_have_text("Gray policy")
    expect(page.locator(".actions")).to_contain_text("You have the viewer role: read only.")
    expect(page.locator("#preview-button")).to_have_count(0)
    expect(page.locator("#save-button")).to_have_count(0)
