"""Issue 26: the pages that take a service or a version offer the registered ones
(dashboard/pickers.py); the browser side is tests/browser/test_pickers.py."""

import re

import pytest
from django.test import Client

from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(make_user):
    for name, versions in {"order-app": ["V1", "V3"], "user-app": ["V1", "V2"]}.items():
        service = Service.objects.create(name=name)
        for version in versions:
            Instance.objects.create(service=service, instance_id=f"{name}-{version}",
                                    host="10.0.0.1", port=7201, version=version,
                                    state=Instance.UP)  # fmt: skip
    client = Client()
    client.force_login(make_user("olga", "operator"))
    return client


def datalist(page: str, list_id: str) -> list[str]:
    found = re.search(f'<datalist id="{list_id}">(.*?)</datalist>', page, re.S)
    assert found, f"no datalist {list_id}"
    return re.findall(r'<option value="([^"]*)"', found.group(1))


def list_of(page: str, input_id: str) -> str:
    tag = re.search(f'<input[^>]*id="{input_id}"[^>]*>', page)
    assert tag, f"no input {input_id}"
    return re.search(r'list="([^"]*)"', tag.group(0)).group(1)


def test_the_release_form_offers_the_chosen_services_versions(operator):
    page = operator.get("/releases/?service=user-app").content.decode()
    assert datalist(page, list_of(page, "id_service")) == ["order-app", "user-app"]
    assert datalist(page, list_of(page, "id_to_version")) == ["V1", "V2"]
    assert list_of(page, "id_from_version") == list_of(page, "id_to_version")
    assert 'data-version-inputs="id_to_version id_from_version"' in page


def test_the_service_page_offers_its_own_versions(operator):
    page = operator.get("/services/order-app/").content.decode()
    assert datalist(page, list_of(page, "id_prod_version")) == ["V1", "V3"]
    assert datalist(page, list_of(page, "id_gray_version")) == ["V1", "V3"]


def test_the_policy_editor_offers_every_version(operator):
    page = operator.get("/policy/").content.decode()
    assert list_of(page, "id_prod_version") == "all-versions"
    assert sorted(set(datalist(page, "all-versions"))) == ["V1", "V2", "V3"]
