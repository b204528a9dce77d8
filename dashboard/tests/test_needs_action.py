"""The overview's first read: a badge for each thing an operator must act on, linking where
it is done, fetched again by the live updates from /overview/needs-action/; and each
service's state in one line (healthy, gray worse, not enough data with its request count)."""

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.attention import needs_action
from dashboard.minute_health import minute_health
from gateways import generation
from gateways.models import Gateway
from metrics import live, services
from metrics.samples import Sample
from policy.freezes import create_freeze
from policy.publishing import load_state
from policy.services import quarantine_version
from registry_sync.models import Service
from releases.models import Release

pytestmark = pytest.mark.django_db


@pytest.fixture
def user_app():
    load_state()
    return Service.objects.create(name="user-app")


@pytest.fixture
def client(client, make_user):
    """Signed in as a viewer."""
    client.force_login(make_user("vera", "viewer"))
    return client


def badges(client) -> list[tuple[str, str, str]]:
    """(kind, link, text) of each badge the fragment shows."""
    answer = client.get("/overview/needs-action/")
    assert answer.status_code == 200
    return re.findall(
        r'<a class="action-badge action-\w+" data-kind="(\w+)" href="([^"]*)" title="[^"]*">'
        r"([^<]*)</a>",
        answer.content.decode(),
    )


def test_nothing_to_act_on_says_so(client, user_app):
    assert badges(client) == []
    assert 'data-kind="none">Nothing needs action.' in client.get("/").content.decode()


def test_a_quarantined_version_links_to_where_it_is_lifted(client, user_app):
    quarantine_version("user-app", "V2", actor="release", source="release")
    assert badges(client) == [
        ("quarantine", "/services/user-app/#quarantine", "V2 of user-app quarantined")
    ]


def test_a_paused_release_and_one_awaiting_approval_link_to_their_pages(client, user_app):
    # One active release per service: a service of its own for each.
    made = {
        state: Release.objects.create(
            service=f"{state}-app",
            from_version="V1",
            to_version="V2",
            state=state,
            steps=[{"percent": 10}],
            analysis={},
        )  # fmt: skip
        for state in ("paused", "awaiting_approval", "running", "promoted")
    }
    paused, waiting = made["paused"].pk, made["awaiting_approval"].pk
    assert badges(client) == [
        ("release", f"/releases/{paused}/", f"release {paused} of paused-app paused"),
        (
            "release",
            f"/releases/{waiting}/",
            f"release {waiting} of awaiting_approval-app awaits approval",
        ),
    ]


def test_failing_and_quiet_gateways_make_one_badge(client, user_app, settings):
    current = generation.bump("test")
    Gateway.objects.create_with_credentials(name="edge", acked_generation=current)
    failing, _, _ = Gateway.objects.create_with_credentials(
        name="push-1", mode=Gateway.PUSH, acked_generation=current - 1
    )
    Gateway.objects.filter(pk=failing.pk).update(last_error="connection refused")
    assert badges(client) == [("gateway", "/gateways/", "gateway push-1 failing")]
    quiet, _, _ = Gateway.objects.create_with_credentials(name="pull-9", acked_generation=current)
    Gateway.objects.filter(pk=quiet.pk).update(
        last_seen=timezone.now() - timedelta(seconds=settings.GATEWAY_STALE_SECONDS + 5)
    )
    assert badges(client) == [
        ("gateway", "/gateways/", "2 gateways failing or not heard from: pull-9, push-1")
    ]


def test_a_freeze_in_force_shows_and_the_next_start_or_end_is_when_to_look_again(client, user_app):
    now = timezone.now().replace(microsecond=0)
    later = create_freeze(
        starts_at=now + timedelta(minutes=30), ends_at=now + timedelta(hours=1),
        services=[], reason="Sale", actor="ada", source="api",
    )  # fmt: skip
    assert badges(client) == []
    assert needs_action(load_state().document).next_change == later.starts_at
    create_freeze(
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(minutes=10),
        services=["user-app"], reason="Audit", actor="ada", source="api",
    )  # fmt: skip
    until = (now + timedelta(minutes=10)).strftime("%H:%M")
    assert badges(client) == [
        ("freeze", "/releases/#upcoming", f"freeze until {until} UTC: user-app")
    ]
    assert needs_action(load_state().document).next_change == now + timedelta(minutes=10)
    fragment = client.get("/overview/needs-action/").content.decode()
    assert f'data-next-change="{int((now + timedelta(minutes=10)).timestamp())}"' in fragment


def test_the_badges_need_a_signed_in_viewer(client, user_app):
    client.logout()
    assert client.get("/overview/needs-action/").status_code == 302


@pytest.fixture
def traffic(monkeypatch, user_app):
    monkeypatch.setattr(live, "_configured", live.MemoryWindows())
    current = generation.bump("test")
    edge, _, _ = Gateway.objects.create_with_credentials(name="edge", acked_generation=current)

    def count(version: str, total: int, errors: int = 0) -> None:
        services.ingest(edge, [Sample("user-app", version, int(time.time()), total, errors, 5.0)])

    return count


def state_line(client) -> tuple[str, str]:
    page = client.get("/").content.decode()
    found = re.search(
        r'<li data-service="user-app"[^>]* data-state="(\w+)">.*?'
        r'<span class="service-state" data-field="state">(.*?)</span>',
        page,
    )
    return found.group(1), found.group(2)


def test_a_service_without_enough_requests_says_how_many_it_had(client, traffic):
    traffic("V1", 30)
    traffic("V2", 3)
    assert state_line(client) == (
        "insufficient",
        "not enough data (33 requests in the last minute)",
    )


def test_gray_worse_than_prod_by_more_than_a_point_says_by_how_much(client, traffic):
    traffic("V1", 100)
    traffic("V2", 100, errors=5)
    assert state_line(client) == ("worse", "gray worse (−5 pts)")


def test_both_versions_alike_with_enough_requests_read_healthy(client, traffic):
    traffic("V1", 200, errors=1)
    traffic("V2", 100, errors=1)
    assert state_line(client) == ("healthy", "healthy")


def test_gray_worse_wins_over_not_enough_data_only_when_both_have_a_rate(traffic):
    traffic("V1", 100)
    traffic("V2", 10, errors=10)  # all failing, but too few to say
    rows = [{"name": "user-app", "prod_version": "V1", "gray_version": "V2"}]
    assert minute_health(rows)["user-app"].state == "insufficient"


def test_making_or_ending_a_freeze_tells_the_live_pages(monkeypatch, user_app):
    import events
    from policy.freezes import end_freeze

    sent = []
    monkeypatch.setattr(events, "publish", lambda *published: sent.extend(published))
    now = timezone.now()
    freeze = create_freeze(
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(minutes=10),
        services=[], reason="Audit", actor="ada", source="api",
    )  # fmt: skip
    end_freeze(freeze.pk, actor="ada", source="api")
    assert [event.as_json() for event in sent] == [{"type": "freeze", "freeze": freeze.pk}] * 2
