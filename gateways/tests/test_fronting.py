"""What a gateway fronts: the services of the generation it acked (known after the
document's content is gone), narrowed by its `fronts`; shown and audited as gateways are."""

import importlib
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from gateways import fronting, generation
from gateways.models import DocumentService, Gateway, Generation
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


def test_each_generation_keeps_knowing_its_services(make_gateway):
    Service.objects.create(name="user-app")
    Service.objects.create(name="old-app")
    first = generation.bump("two services")
    Service.objects.filter(name="old-app").delete()
    Service.objects.create(name="order-app")
    second = generation.bump("one gone, one new")
    assert Generation.objects.get(number=first).content == "", "its content is gone"
    asked = {"user-app", "old-app", "order-app"}
    on_first, _, _ = make_gateway("on-first", acked_generation=first)
    on_second, _, _ = make_gateway("on-second", acked_generation=second)
    assert set(fronting.refusals(on_first, asked)) == {"order-app"}
    assert set(fronting.refusals(on_second, asked)) == {"old-app"}
    none, _, _ = make_gateway("none")
    assert fronting.refusals(none, asked) == dict.fromkeys(
        asked, "this gateway has acked no gateway document yet"
    )
    narrowed, _, _ = make_gateway("narrowed", acked_generation=second, fronts=["order-app"])
    assert fronting.refusals(narrowed, asked) == {
        "user-app": "not in this gateway's fronts",
        "old-app": "not in this gateway's fronts",
    }
    Service.objects.create(name="old-app")
    third = generation.bump("back again")
    assert fronting.refusals(on_first, asked).keys() == {"order-app"}
    assert set(fronting.refusals(on_second, asked)) == {"old-app"}
    on_second.acked_generation = third
    assert fronting.refusals(on_second, asked) == {}


def test_pruning_generations_forgets_the_stays_that_ended_before_them():
    Service.objects.create(name="old-app")
    generation.bump("old-app in it")
    Service.objects.all().delete()
    gone = generation.bump("old-app gone")
    Service.objects.create(name="user-app")
    generation.bump("user-app in it")
    Generation.objects.filter(number__lte=gone).update(
        created_at=timezone.now() - generation.HISTORY - timedelta(hours=1)
    )
    generation.prune(timezone.now())
    assert list(DocumentService.objects.values_list("name", "until_generation")) == [
        ("user-app", None)
    ]


def test_the_migration_takes_the_newest_documents_services_as_every_generations():
    Service.objects.create(name="user-app")
    newest = generation.bump("before the upgrade")
    DocumentService.objects.all().delete()
    migration = importlib.import_module("gateways.migrations.0004_gateway_fronts")
    migration.stays_of_the_newest_document(apps, None)
    gateway = Gateway.objects.create_with_credentials(name="edge", acked_generation=newest - 1)[0]
    assert fronting.refusals(gateway, {"user-app", "ghost-app"}).keys() == {"ghost-app"}


def test_the_gateways_page_shows_what_each_fronts_and_was_refused(make_gateway, make_user):
    make_gateway("edge-1", fronts=["order-app", "user-app"])
    edge, _, _ = make_gateway("edge-2")
    fronting.record_refused(edge, {"ghost-app": 7, "user-app": 2})
    client = APIClient()
    client.force_login(make_user("vera", "viewer"))
    html = client.get("/gateways/").content.decode()
    assert '<td data-field="fronts" class="small">order-app, user-app</td>' in html
    assert '<td data-field="fronts" class="small">all</td>' in html
    assert '<span data-field="refused_samples">9</span>' in html
    assert "ghost-app 7, user-app 2" in html


def test_a_change_of_fronts_is_audited_and_redelivers_nothing(api, make_gateway):
    make_gateway("edge", "push", "http://127.0.0.1:9/", acked_generation=generation.bump("x"))
    response = api("admin").patch("/api/v1/gateways/edge/", {"fronts": ["user-app"]}, format="json")
    assert response.status_code == 200, response.content
    entry = AuditEntry.objects.get(action="gateway.update")
    assert (entry.before["fronts"], entry.after["fronts"]) == ([], ["user-app"])
    assert Gateway.objects.get(name="edge").acked_generation > 0, "its delivery is the same"
    viewer = api("viewer").patch("/api/v1/gateways/edge/", {"fronts": []}, format="json")
    assert viewer.status_code == 403
