"""The traffic split (the last 5 minutes by version and by lane) and quarantined versions, on
the service page and the overview; lifting a quarantine from the service page."""

import re
import time
from html import unescape

import pytest
from django.test import Client

from audit.models import AuditEntry
from metrics import rollups
from metrics.samples import Sample
from policy.lanes import quarantined_of
from policy.publishing import load_state
from policy.services import create_lane, quarantine_version
from registry_sync.models import Instance, Service
from releases.models import Release

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(["V1", "V2", "V3"]):
        Instance.objects.create(service=service, instance_id=f"i{n}", host=f"10.0.0.{n}",
                                port=7201, version=version, state="UP")  # fmt: skip
    create_lane("feature-x", {"priority": 100, "members": {"user-app": "V3"}}, actor="t",
                source="api")  # fmt: skip
    return service


def counted(**by_version_and_lane: int) -> None:
    """Requests of user-app two seconds ago, e.g. V1=60, V3__feature_x=10."""
    ts = int(time.time()) - 2
    samples = []
    for key, total in by_version_and_lane.items():
        version, _, lane = key.partition("__")
        samples.append(
            Sample("user-app", version, ts, total, 0, 5.0, lane.replace("_", "-") or None)
        )
    rollups.add(samples)


def login(client: Client, make_user, role: str) -> Client:
    client.force_login(make_user(f"{role}-1", role))
    return client


def text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip())


def part(html: str, pattern: str) -> str:
    found = re.search(pattern, html, re.S)
    assert found, pattern
    return found.group(0)


def legend(html: str, split: str) -> list[str]:
    row = part(html, rf'<div class="split-row" data-split="{split}">.*?</ul>')
    return [text(item) for item in re.findall(r"<li data-name=.*?</li>", row, re.S)]


def test_the_service_page_shows_the_split_by_version_and_by_lane(client, make_user, fleet):
    counted(V1=60, V1__feature_x=10, V2__gray=20, V3__feature_x=10)
    html = login(client, make_user, "viewer").get("/services/user-app/").content.decode()
    card = part(html, r'<section class="card" id="traffic-split">.*?</section>')
    assert "last 5 minutes, 100 requests" in text(card)
    assert legend(card, "versions") == ["V1 70 %", "V2 20 %", "V3 10 %"]
    assert legend(card, "lanes") == ["no lane 60 %", "feature-x 20 %", "gray 20 %"]
    # Each share a rectangle of the bar, placed by attributes (no inline style).
    bar = part(card, r'<div class="split-row" data-split="versions">.*?</svg>')
    rects = re.findall(r'<rect class="([\w-]+)" x="([\d.]+)" y="0" width="([\d.]+)"', bar)
    assert rects == [
        ("seg-prod", "0.000", "70.000"),
        ("seg-gray", "70.000", "20.000"),
        ("seg-0", "90.000", "10.000"),
    ]
    assert "style=" not in card


def test_the_split_counts_the_last_5_minutes_only(client, make_user, fleet):
    rollups.add([Sample("user-app", "V2", int(time.time()) // 60 * 60 - 420, 50, 0, 5.0)])
    html = login(client, make_user, "viewer").get("/services/user-app/").content.decode()
    assert "no requests in the last 5 minutes" in text(
        part(html, r'id="traffic-split">.*?</section>')
    )
    counted(V1=3)
    html = client.get("/services/user-app/").content.decode()
    assert legend(html, "versions") == ["V1 100 %"]
    assert legend(html, "lanes") == ["no lane 100 %"]


def test_a_tiny_share_is_not_shown_as_none(client, make_user, fleet):
    counted(V1=995, V3__feature_x=5)
    html = login(client, make_user, "viewer").get("/services/user-app/").content.decode()
    assert legend(html, "versions") == ["V1 >99 %", "V3 <1 %"]


def test_the_overview_shows_each_services_split(client, make_user, fleet):
    Service.objects.create(name="order-app")
    counted(V1=75, V3__feature_x=25)
    html = login(client, make_user, "viewer").get("/").content.decode()
    row = part(html, r'<tr data-service="user-app".*?</tr>')
    cell = part(row, r'<td data-field="split">.*?</td>')
    assert legend(cell, "versions") == ["V1 75 %", "V3 25 %"]
    # Compact: the lanes of GRAY requests listed, without a bar.
    assert legend(cell, "lanes") == ["feature-x 25 %"]
    assert cell.count("<svg") == 1
    other = part(html, r'<tr data-service="order-app".*?</tr>')
    assert "no requests in the last 5 minutes" in text(other)


def test_the_overview_lists_lanes_only_when_a_request_had_one(client, make_user, fleet):
    counted(V1=10)
    html = login(client, make_user, "viewer").get("/services/").content.decode()
    cell = part(html, r'<td data-field="split">.*?</td>')
    assert legend(cell, "versions") == ["V1 100 %"]
    assert 'data-split="lanes"' not in cell


@pytest.fixture
def quarantined(fleet):
    release = Release.objects.create(
        service="user-app", from_version="V1", to_version="V2", state="rolled_back",
        steps=[{"percent": 100}], analysis={},
    )  # fmt: skip
    quarantine_version("user-app", "V2", actor="release", source="release")
    return release


def test_the_service_page_says_which_release_quarantined_a_version(client, make_user, quarantined):
    html = login(client, make_user, "operator").get("/services/user-app/").content.decode()
    card = part(html, r'<section class="card" id="quarantine">.*?</section>')
    assert f"V2 quarantined (release {quarantined.pk} rolled back)" in text(card)
    assert f'href="/releases/{quarantined.pk}/"' in card
    form = part(card, r"<form.*?</form>")
    assert 'action="/services/user-app/quarantine/V2/lift/"' in form
    assert "data-confirm=" in form and "csrfmiddlewaretoken" in form
    assert "Lift quarantine" in text(form)


def test_a_version_quarantined_without_a_rolled_back_release_is_shown_too(client, make_user, fleet):
    quarantine_version("user-app", "V3", actor="t", source="api")
    html = login(client, make_user, "viewer").get("/services/user-app/").content.decode()
    card = part(html, r'<section class="card" id="quarantine">.*?</section>')
    assert text(card).startswith("Quarantine V3 quarantined no traffic at all")


def test_no_quarantine_no_card(client, make_user, fleet):
    html = login(client, make_user, "operator").get("/services/user-app/").content.decode()
    assert 'id="quarantine"' not in html


def test_the_overview_marks_a_quarantined_service(client, make_user, quarantined):
    html = login(client, make_user, "viewer").get("/").content.decode()
    row = part(html, r'<tr data-service="user-app".*?</tr>')
    assert re.findall(r'data-field="quarantined"[^>]*>([^<]*)<', row) == ["V2 quarantined"]


def test_viewers_see_no_lift_button_and_may_not_lift(client, make_user, quarantined):
    html = login(client, make_user, "viewer").get("/services/user-app/").content.decode()
    assert "V2 quarantined" in text(html) and "Lift quarantine" not in html
    response = client.post("/services/user-app/quarantine/V2/lift/")
    assert response.status_code == 403
    assert quarantined_of(load_state().document) == {"user-app": ["V2"]}


def test_an_operator_lifts_it_with_the_form(make_user, quarantined):
    operator = login(Client(enforce_csrf_checks=True), make_user, "operator")
    assert operator.post("/services/user-app/quarantine/V2/lift/").status_code == 403  # no CSRF
    page = operator.get("/services/user-app/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = operator.post(
        "/services/user-app/quarantine/V2/lift/", {"csrfmiddlewaretoken": token}, follow=True
    )
    assert response.redirect_chain == [("/services/user-app/", 302)]
    html = response.content.decode()
    assert "V2 of user-app is out of quarantine" in html and 'id="quarantine"' not in html
    assert quarantined_of(load_state().document) == {}
    entry = AuditEntry.objects.filter(action="service.quarantine_lifted").get()
    assert (entry.actor, entry.source) == ("operator-1", "ui")


def test_lifting_what_is_not_quarantined_says_so(client, make_user, fleet):
    login(client, make_user, "operator")
    response = client.post("/services/user-app/quarantine/V1/lift/", follow=True)
    assert "V1 of user-app is not quarantined." in response.content.decode()
    assert client.get("/services/user-app/quarantine/V1/lift/").status_code == 405
    assert client.post("/services/nope/quarantine/V1/lift/").status_code == 404
