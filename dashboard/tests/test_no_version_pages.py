"""Instances without a version (they take ALL traffic only) are pointed out where operators
look: the overview's services table and registry row, the service page."""

import re

import pytest

from registry_sync.models import Instance, Registry, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client, make_user):
    client.force_login(make_user("vera", "viewer"))
    return client


@pytest.fixture
def fleet():
    registry = Registry.objects.create(name="nacos-prod", kind="embedded")
    service = Service.objects.create(name="user-app", registry=registry)
    for n, version in enumerate(["V1", None, None]):
        Instance.objects.create(service=service, instance_id=f"i{n}", host=f"10.0.0.{n}",
                                port=7201, version=version, state="UP")  # fmt: skip
    return registry


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_overview_counts_them_per_service_and_per_registry(viewer, fleet):
    html = viewer.get("/").content.decode()
    row = re.search(r'<tr data-service="user-app".*?</tr>', html, re.S).group(0)
    assert "3 UP" in text(row) and "2 without version" in text(row)
    registry = re.search(r'<tr data-registry="nacos-prod">.*?</tr>', html, re.S).group(0)
    assert "2 without version" in text(registry)
    fleet.default_version = "V1"
    fleet.save()
    registry = re.search(
        r'<tr data-registry="nacos-prod">.*?</tr>', viewer.get("/").content.decode(), re.S
    ).group(0)
    assert "default version V1" in text(registry)


def test_the_service_page_marks_each_and_counts_them(viewer, fleet):
    html = viewer.get("/services/user-app/").content.decode()
    assert "2 without version (ALL traffic only)" in text(html)
    table = re.search(r'<table class="table" id="instances".*?</table>', html, re.S).group(0)
    assert text(table).count("no version") == 2


def test_no_mention_without_such_instances(viewer, fleet):
    Instance.objects.filter(version=None).update(version="V2")
    assert "without version" not in viewer.get("/").content.decode()
    assert "without version" not in viewer.get("/services/user-app/").content.decode()
