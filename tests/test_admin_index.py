"""The admin's index names every model in a plural a person would write: "Webhook
deliveries", never Django's default "Webhook deliverys"."""

import re

import pytest
from django.contrib import admin

pytestmark = pytest.mark.django_db


def test_the_admin_index_spells_plurals(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert ">Webhook deliveries</a>" in page
    names = re.findall(r'<th scope="row" id="[^"]*">\s*<a [^>]*>([^<]+)</a>', page)
    assert len(names) == len(admin.site._registry)
    # A consonant and a "y" take "ies".
    assert [name for name in names if re.search(r"[^aeiou]ys$", name)] == []
