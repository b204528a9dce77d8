"""Issue 26: wherever an operator types a service or a version, the page offers the
services the registries know and, once a service is chosen, its versions (the release,
bundle and freeze forms, the policy editor, the simulator; the lane editor's rows in
test_lanes.py). They only suggest: an unknown service still gets the form's error."""

import pytest
from playwright.sync_api import expect

from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = [pytest.mark.browser, pytest.mark.slow]
VERSIONS = {"order-app": ["V1", "V3"], "user-app": ["V1", "V2"]}


@pytest.fixture
def fleet(transactional_db):
    for n, (name, versions) in enumerate(VERSIONS.items()):
        service = Service.objects.create(name=name)
        for version in versions:
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host=f"10.0.{n}.1", port=7201, version=version,
                                    state=Instance.UP)  # fmt: skip


def offered(page, list_of: str) -> list[str]:
    """The options of the datalist the input `list_of` (a selector) points at."""
    list_id = page.locator(list_of).get_attribute("list")
    return page.locator(f"datalist#{list_id} option").evaluate_all("o => o.map(x => x.value)")


def test_the_release_and_bundle_forms_offer_services_and_their_versions(
    page, fleet, make_role_user, log_in, screenshot
):
    make_role_user("olga", "operator")
    log_in("olga")
    page.goto("/releases/")
    assert offered(page, "#id_service") == ["order-app", "user-app"]
    page.fill("#id_service", "user-app")
    assert offered(page, "#id_to_version") == VERSIONS["user-app"]
    assert offered(page, "#id_from_version") == VERSIONS["user-app"]
    page.fill("#id_service", "order-app")
    assert offered(page, "#id_to_version") == VERSIONS["order-app"]
    screenshot("release-form-pickers")

    # The bundle's releases, one per line: picked a service and a version at a time.
    picker = page.locator("#bundle-line-picker")
    expect(picker).to_be_visible()
    for service, version in (("order-app", "V3"), ("user-app", "V2")):
        picker.locator("#bundle-pick-service").fill(service)
        assert offered(page, "#bundle-pick-version") == VERSIONS[service]
        picker.locator("#bundle-pick-version").fill(version)
        picker.locator("button").click()
    assert page.input_value("#id_bundle-releases") == "order-app V3\nuser-app V2\n"

    # Unknown: every version offered, and the form's own error on submit.
    page.fill("#id_service", "ghost-app")
    assert offered(page, "#id_to_version") == ["V1", "V3", "V1", "V2"]
    page.fill("#id_to_version", "V2")
    with page.expect_navigation():
        page.click("#release-form button[type=submit]")
    expect(page.locator(".field.has-error:has(#id_service) .field-error")).not_to_have_count(0)
    assert not Release.objects.exists()


def test_freeze_policy_and_simulator_offer_the_known_services_and_versions(
    page, fleet, make_role_user, log_in
):
    make_role_user("ada", "admin")
    log_in("ada")
    page.goto("/releases/")
    page.click("#upcoming details.freeze-form summary")
    # Several services, comma-separated: the next one offered after those typed.
    assert offered(page, "#id_services") == ["order-app", "user-app"]
    page.fill("#id_services", "user-app, ")
    assert offered(page, "#id_services") == ["user-app, order-app"]

    page.goto("/policy/")
    for field in ("#id_prod_version", "#id_gray_version"):
        assert sorted(set(offered(page, field))) == ["V1", "V2", "V3"]

    page.goto("/simulate/")
    page.fill("#id_path", "order-app,")
    assert offered(page, "#id_path") == ["order-app, user-app"]
