"""Issue 24 in the browser: operator A's policy edit touching a protected service is kept
as a draft, and the editor says so with a link to it; operator B finds it on the Drafts
page, reads its diff and approves it, and the revision appears."""

import pytest
from playwright.sync_api import expect

from policy.models import PolicyDraft
from policy.publishing import load_state
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.browser


def test_another_operator_approves_a_draft_from_the_drafts_page(
    page, live_server, make_role_user, log_in, screenshot
):
    service = Service.objects.create(name="user-app", protected=True)
    for n, version in enumerate(("V1", "V2")):  # the default prod and gray versions
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{n}.1", port=7201, version=version,
                                state=Instance.UP)  # fmt: skip
    make_role_user("olga", "operator")
    make_role_user("anna", "operator")
    live = load_state().revision

    log_in("olga")
    page.goto("/policy/")
    page.fill("#id_users", "1001")
    page.fill("#id_comment", "First beta user")
    with page.expect_navigation():
        page.click("#preview-button")
    with page.expect_navigation():
        page.click("#save-button")
    draft = PolicyDraft.objects.get()
    notice = page.locator(".flash-info")
    expect(notice).to_contain_text(
        f"Saved as draft {draft.pk}, waiting for another operator's approval"
    )
    screenshot("policy-saved-as-draft")
    assert load_state().revision == live
    with page.expect_navigation():
        notice.locator("a", has_text=f"See draft {draft.pk}").click()
    expect(page.locator("#draft-author")).to_have_text("olga")
    with page.expect_navigation():
        page.click("#approve-draft")
    expect(page.locator(".flash-error")).to_have_text(
        f"Draft {draft.pk} is yours: another operator approves it."
    )
    assert PolicyDraft.objects.get().state == "pending"

    page.context.clear_cookies()
    log_in("anna")
    page.click("nav >> text=Drafts")
    row = page.locator(f'#pending-drafts tr[data-draft-id="{draft.pk}"]')
    expect(row).to_contain_text("olga")
    with page.expect_navigation():
        row.locator("a").first.click()
    added = page.locator("table.diff tbody tr", has=page.locator("code", has_text="gray.users"))
    expect(added.locator("td.added div")).to_have_text(['+ "1001"'])
    screenshot("draft-review")
    page.fill("#draft-reason", "Checked with the beta list")
    with page.expect_navigation():
        page.click("#approve-draft")
    expect(page).to_have_url(f"{live_server.url}/revisions/{live + 1}/")
    expect(page.locator(".flash-success")).to_have_text(
        f"Draft {draft.pk} approved: published revision {live + 1}."
    )
    expect(page.locator("h1 .pill")).to_have_text("live")
    expect(page.locator(".comment")).to_contain_text(f"Draft {draft.pk} by olga, approved by anna")
    screenshot("draft-approved-revision")
    assert load_state().document["gray"]["users"] == ["1001"]

    page.click("nav >> text=Drafts")
    expect(page.locator("#pending-drafts tbody")).to_contain_text("No drafts waiting.")
    expect(page.locator(f'#decided-drafts tr[data-draft-id="{draft.pk}"]')).to_contain_text(
        "approved"
    )
