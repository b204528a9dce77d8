"""`GET /api/v1/` answers a newcomer with links to the main collections and the schema."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_a_viewer_gets_the_links_and_each_answers_an_admin(api):
    root = api("viewer").get("/api/v1/")
    assert root.status_code == 200
    links = root.json()
    assert links["releases"] == "http://testserver/api/v1/releases/"
    assert links["schema"] == "http://testserver/api/schema/"
    assert links["docs"] == "http://testserver/api/docs/"
    assert {"policy", "services", "gateways", "lanes", "audit"} <= set(links)
    admin = api("admin")  # webhooks are the admin's to read
    for name, url in links.items():
        assert admin.get(url).status_code == 200, name


def test_the_root_needs_a_login_as_the_rest_of_the_api_does():
    assert APIClient().get("/api/v1/").status_code in (401, 403)
