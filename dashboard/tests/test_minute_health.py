"""The service tables' "Success, last minute" cell: one line per version with its request
count, a rate only from enough requests, the gray delta on a line of its own; as rendered,
before the live updates (tests/browser/test_live_charts.py follows those)."""

import re
import time

import pytest

from gateways import generation
from gateways.models import Gateway
from metrics import live, services
from metrics.samples import Sample
from policy.publishing import load_state
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic(monkeypatch):
    """Requests of user-app (prod V1, gray V2) counted this second, by version."""
    monkeypatch.setattr(live, "_configured", live.MemoryWindows())
    load_state()
    Service.objects.create(name="user-app")
    current = generation.bump("test")  # a gateway's figures count once it acked a document
    edge, _, _ = Gateway.objects.create_with_credentials(name="edge", acked_generation=current)

    def count(version: str, total: int, errors: int = 0) -> None:
        services.ingest(edge, [Sample("user-app", version, int(time.time()), total, errors, 5.0)])

    return count


def health_cell(client, make_user, path: str = "/") -> str:
    client.force_login(make_user("vera", "viewer"))
    page = client.get(path).content.decode()
    return re.search(r'<td class="live-health" data-field="health">(.*?)</td>', page).group(1)


def test_a_few_requests_a_minute_read_as_a_line_per_version(client, make_user, traffic):
    traffic("V1", 3)
    assert health_cell(client, make_user) == (
        '<span class="version-health" data-version="V1">V1 —, 3 requests</span>'
        '<span class="version-health" data-version="V2">V2 —, 0 requests</span>'
    )


def test_enough_requests_show_rates_and_the_gray_delta(client, make_user, traffic):
    traffic("V1", 100)
    traffic("V2", 60, errors=6)
    assert health_cell(client, make_user, "/services/") == (
        '<span class="version-health" data-version="V1">V1 100 %, 100 requests</span>'
        '<span class="version-health" data-version="V2">V2 90 %, 60 requests</span>'
        '<span class="overview-delta worse" data-delta="-10.0000">gray −10 pts</span>'
    )
