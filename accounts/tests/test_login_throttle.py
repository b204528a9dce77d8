"""Login throttling (django-axes, settings AXES_*): after AXES_FAILURE_LIMIT failed logins for
one username from one address, that pair is locked out for the cool-off period, whatever
the password; the login page says so. Every login through Django's authenticate() counts:
the login form and the Nacos login of the embedded registry."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.utils import timezone

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
NACOS_LOGIN = "/nacos/v1/auth/login"


@pytest.fixture(autouse=True)
def axes_on(settings):
    # Off for the rest of the suite: the test client's login() passes no request.
    settings.AXES_ENABLED = True
    limit, cool_off = settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME
    assert (limit, cool_off) == (5, timedelta(minutes=15)), "the defaults"


@pytest.fixture
def olga(make_user):
    return make_user("olga", "operator")


def sign_in(client, password: str, username: str = "olga", address: str = "10.0.0.7"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_sixth_try_is_locked_out_even_with_the_right_password(client, olga):
    for _ in range(4):
        response = sign_in(client, "wrong")
        assert response.status_code == 200  # the form again, with its error
        assert b"Please enter a correct username and password" in response.content
    response = sign_in(client, "wrong")  # the 5th failure locks
    assert response.status_code == 429
    response = sign_in(client, "pw-for-tests")
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed sign-ins for this username from your address" in page
    assert "locked for 15 minutes" in page
    assert 'id="id_username"' in page, "it is the login page, saying so"
    assert "_auth_user_id" not in client.session


def test_the_lockout_is_per_username_and_address(client, olga, make_user):
    make_user("vera", "viewer")
    for _ in range(5):
        sign_in(client, "wrong")
    assert sign_in(client, "pw-for-tests").status_code == 429
    # The same user from elsewhere, and another user from here, may still sign in.
    assert sign_in(client, "pw-for-tests", address="10.0.0.8").status_code == 302
    client.logout()
    assert sign_in(client, "pw-for-tests", username="vera").status_code == 302


def test_the_lockout_ends_after_the_cool_off(client, olga):
    for _ in range(5):
        sign_in(client, "wrong")
    assert sign_in(client, "pw-for-tests").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert sign_in(client, "pw-for-tests").status_code == 302


def test_a_successful_sign_in_starts_the_count_again(client, olga):
    for _ in range(4):
        sign_in(client, "wrong")
    assert sign_in(client, "pw-for-tests").status_code == 302
    client.logout()
    for _ in range(4):
        assert sign_in(client, "wrong").status_code == 200
    assert sign_in(client, "pw-for-tests").status_code == 302


def test_the_limit_and_cool_off_come_from_the_settings(client, olga, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=1)
    sign_in(client, "wrong")
    assert sign_in(client, "wrong").status_code == 429
    assert "locked for 1 minute;" in sign_in(client, "pw-for-tests").content.decode()


def nacos_login(client, password: str):
    # As Nacos clients send it: a form body.
    body = f"username=fleet&password={password}"
    return client.post(NACOS_LOGIN, body, content_type="application/x-www-form-urlencoded")


def test_the_nacos_login_counts_and_is_locked_out_too(client, make_user):
    make_user("fleet", "service")
    for _ in range(4):
        response = nacos_login(client, "wrong")
        assert response.status_code == 403
    response = nacos_login(client, "wrong")
    assert response.status_code == 429  # the 5th failure locks
    response = nacos_login(client, "pw-for-tests")
    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.json()["detail"]
    assert sign_in(client, "pw-for-tests", username="fleet", address="127.0.0.1").status_code == (
        429
    ), "one count for both logins"
