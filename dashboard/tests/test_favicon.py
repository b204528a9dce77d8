"""Every page names its icon, and /favicon.ico (where browsers look on pages that name none)
leads to it: no 404 in the console on each page load."""

import pytest

pytestmark = pytest.mark.django_db


def test_pages_name_an_icon_that_is_served(client, make_user):
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)


def test_favicon_ico_leads_to_the_icon_without_a_login(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [("/static/favicon.svg", 301)]
