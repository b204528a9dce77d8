"""Start and Abort on a release's page ask first, as taking an instance offline does:
dismissed, nothing happens (the release stays pending, then running); accepted, it does."""

import pytest

from releases import services
from releases.models import Release
from releases.tests.conftest import QUIET_ANALYSIS

pytestmark = pytest.mark.browser


@pytest.mark.usefixtures("fleet")
def test_start_and_abort_ask_and_a_dismissal_changes_nothing(page, make_role_user, log_in):
    make_role_user("olga", "operator")
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=[{"percent": 10}, {"percent": 100}],
        analysis_settings=QUIET_ANALYSIS,
        actor="olga",
        source="api",
    )
    asked: list[str] = []
    answer = {"accept": False}

    def on_dialog(dialog) -> None:
        asked.append(dialog.message)
        if answer["accept"]:
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", on_dialog)
    log_in("olga")
    page.goto(f"/releases/{release.pk}/")
    state = page.locator("#release-state")
    for action, before, after in (("start", "pending", "running"), ("abort", "running", "aborted")):
        button = page.locator(f'#release-actions button[data-action="{action}"]')
        answer["accept"] = False
        button.click()
        assert asked[-1].startswith(f"{action.capitalize()} release {release.pk} (user-app V2)?")
        page.wait_for_timeout(500)  # what a submitted form would have had to navigate
        assert state.text_content() == before
        assert Release.objects.get().state == before
        answer["accept"] = True
        with page.expect_navigation():
            button.click()
        assert state.text_content() == after
        assert Release.objects.get().state == after
    assert len(asked) == 4
