"""Start and Abort on a release's page ask first, as taking an instance offline does:
dismissed, nothing happens (the release stays pending, then running); accepted, it does."""

import pytest

from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases import services
from releases.models import Release

pytestmark = pytest.mark.browser


def test_start_and_abort_ask_and_a_dismissal_changes_nothing(page, make_role_user, log_in):
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(("V1", "V2")):
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{n}.1", port=7201, version=version,
                                state=Instance.UP)  # fmt: skip
    update_policy(
        {"enabled": True, "routing": True},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    make_role_user("olga", "operator")
    release = services.create_release(
        service="user-app",
        to_version="V2",
        from_version=None,
        steps=[{"percent": 10}, {"percent": 100}],
        # An interval longer than the test: no analysis changes the state behind its back.
        analysis_settings={
            "interval_s": 300,
            "min_requests": 50,
            "max_error_rate_increase": 1.0,
            "failures_tolerated": 1,
            "max_p95_ms": None,
            "deadline_s": 3600,
        },
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
