"""Where the city header is set (the policy editor) and where a city is tried (the
simulator), the page says the header is believed only from trusted proxies."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client, make_user):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    return client


def field_help(page: str, field_id: str) -> str:
    """The help under the input `field_id`."""
    start = page.index('<div class="muted small">', page.index(f'id="{field_id}"'))
    return page[start : page.index("</div>", start)]


def test_the_policy_editor_says_the_city_header_is_believed_only_from_trusted_proxies(
    operator_client,
):
    page = operator_client.get("/policy/").content.decode()
    help_text = field_help(page, "id_city_header")
    assert "Believed only from a trusted proxy (TRUSTED_PROXIES" in help_text
    assert "local for loopback and private addresses" in help_text
    assert "local (or 本地): loopback and private callers" in page


def test_the_simulator_says_its_city_stands_for_a_trusted_proxys_header(operator_client):
    page = operator_client.get("/simulate/").content.decode()
    help_text = field_help(page, "id_city")
    assert (
        "As a trusted proxy&#x27;s city header says it (gateways believe no one else&#x27;s)"
        in (help_text)
    )
