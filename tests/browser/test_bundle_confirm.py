"""Issue 26: a bundle's Start, Promote, Approve and Abort ask first, as a release's do (the
same data-confirm, dashboard/release_confirms.py): dismissed, nothing happens; accepted, the
whole bundle acts."""

import pytest

from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases import bundles
from releases.models import Release

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_bundle_actions_ask_and_a_dismissal_changes_nothing(page, make_role_user, log_in):
    for n, name in enumerate(("order-app", "user-app")):
        service = Service.objects.create(name=name)
        Instance.objects.create(service=service, instance_id=f"{name}-v2", host=f"10.0.{n}.2",
                                port=7202, version="V2", state=Instance.UP)  # fmt: skip
    update_policy(
        {"enabled": True, "routing": True},
        partial=True,
        actor="setup",
        source="api",
        expected_revision=None,
    )
    make_role_user("olga", "operator")
    bundle = bundles.create_bundle(
        name="checkout",
        members=[{"service": "order-app", "to_version": "V2"},
                 {"service": "user-app", "to_version": "V2"}],
        steps=[{"percent": 10}, {"approval": True}, {"percent": 100}],
        # An interval longer than the test: no analysis changes a state behind its back.
        analysis_settings={"interval_s": 300, "min_requests": 50, "max_error_rate_increase": 1.0,
                           "failures_tolerated": 1, "max_p95_ms": None, "deadline_s": 3600},
        actor="olga",
        source="api",
    )  # fmt: skip
    asked: list[str] = []
    answer = {"accept": False}

    def on_dialog(dialog) -> None:
        asked.append(dialog.message)
        if answer["accept"]:
            dialog.accept()
        else:
            dialog.dismiss()

    def releases() -> list[tuple[str, int]]:
        return list(Release.objects.order_by("service").values_list("state", "step"))

    page.on("dialog", on_dialog)
    log_in("olga")
    page.goto(f"/releases/bundles/{bundle.pk}/")
    what = f"bundle {bundle.pk} (checkout: order-app V2, user-app V2)?"
    for action, before, after in (
        ("start", ("pending", 0), ("running", 0)),
        ("promote", ("running", 0), ("awaiting_approval", 1)),
        ("approve", ("awaiting_approval", 1), ("running", 2)),
        ("abort", ("running", 2), ("aborted", 2)),
    ):
        button = page.locator(f'#bundle-actions button[data-action="{action}"]')
        answer["accept"] = False
        button.click()
        assert asked[-1].startswith(f"{action.capitalize()} {what}")
        page.wait_for_timeout(500)  # what a submitted form would have had to navigate
        assert releases() == [before, before]
        assert page.locator("#bundle-state").text_content() == before[0]
        answer["accept"] = True
        with page.expect_navigation():
            button.click()
        assert releases() == [after, after]
        assert page.locator("#bundle-state").text_content() == after[0]
    assert len(asked) == 8
