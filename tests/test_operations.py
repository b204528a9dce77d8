"""Probes, the OpenAPI document and its docs page."""

import io
import re

import pytest
from django.core.management import call_command


def test_healthz_answers_without_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ready_when_database_broker_and_layer_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()


@pytest.mark.django_db
def test_readyz_names_a_broker_that_does_not_answer_to_staff(client, settings, admin_user):
    from testing.processes import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}  # no reasons for anonymous callers
    client.force_login(admin_user)
    assert set(client.get("/readyz").json()["failures"]) == {"broker"}


def test_the_openapi_schema_validates_without_warnings():
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    for path in ("/api/v1/policy/", "/api/v1/revisions/{n}/rollback/", "/api/v1/simulate/",
                 "/api/v1/instances/{id}/offline/", "/api/v1/registries/"):  # fmt: skip
        assert f"{path}:" in schema


@pytest.mark.django_db
def test_api_docs_are_served_locally_without_a_cdn(client):
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page
    external = [url for url in re.findall(r'(?:src|href)="([^"]+)"', page) if "//" in url]
    assert external == []
