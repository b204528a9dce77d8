"""Issue 26 in the browser: a release form submission with several bad fields, some the
form's own checks refuse and some the API's, shows every error at once, each beside its
field, keeps what was typed and makes nothing."""

import pytest

from releases.models import Release

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.usefixtures("fleet")
def test_a_release_with_several_bad_fields_shows_every_error_at_once(
    page, make_role_user, log_in, screenshot
):
    make_role_user("olga", "operator")
    log_in("olga")
    page.goto("/releases/")
    page.fill("#id_service", "user-app")
    page.fill("#id_to_version", "")  # the form's: required
    page.fill("#id_steps", "10, lots")  # the form's: not a step
    page.fill("#id_interval_s", "1")  # the API's: at least 5
    page.fill("#id_mirror", "150")  # the API's: at most 100
    page.fill("#id_start_at", "2001-01-01T00:00")  # the API's: in the past
    with page.expect_navigation():
        page.click("#release-form button[type=submit]")

    def error_of(field: str) -> str:
        return page.locator(
            f"#release-form .field.has-error:has(#id_{field}) .field-error"
        ).inner_text()

    assert error_of("to_version") == "This field is required."
    assert error_of("steps") == "'lots' is neither 'targeted', 'approval' nor a percentage."
    assert error_of("interval_s") == "Ensure this value is greater than or equal to 5."
    assert "Must be between 0 and 100" in error_of("mirror")
    assert error_of("start_at").startswith("Must be in the future")
    assert page.locator("#release-form .field.has-error").count() == 5
    assert page.input_value("#id_steps") == "10, lots"
    assert not Release.objects.exists()
    screenshot("release-form-every-error")
