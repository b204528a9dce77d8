"""Values on the pages read as JSON and as rounded figures: a revision's or a draft's diff
and the audit log show `false` and `"1001"`, not Python's `False` and `1001`."""

from dataclasses import asdict

import pytest
from django.test import Client

from dashboard.templatetags import display
from dashboard.tests.test_drafts_pages import draft, olga  # noqa: F401 (fixtures)
from policy.publishing import load_state
from policy.services import update_policy
from registry_sync.models import Instance, Service
from releases import services
from releases.analysis import Settings
from releases.models import Release

# An analysed interval's detail as releases/analysis.py stores it (the figures that matter).
ANALYSIS = {
    "verdict": "healthy",
    "window": {
        "gray": {"requests": 300, "errors": 100, "error_rate": 33.3333},
        "prod": {"requests": 1200, "errors": 6, "error_rate": 0.5},
    },
    "test": {"increase_points": -0.2201, "likelihood_ratio": 0.0002279, "p_value": 0.0312},
    "reason": "error rate not higher than prod's",
}
INSUFFICIENT = {
    "verdict": "insufficient_data",
    "window": {"gray": {"requests": 3, "errors": 0, "error_rate": 0.0}},
    "reason": "3 gray requests in the window, fewer than 100",
}

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(make_user) -> Client:
    client = Client()
    client.force_login(make_user("vera", "viewer"))
    return client


def make_analysed_release() -> Release:
    """A running release of user-app V1 → V2 with one analysed interval."""
    load_state()
    service = Service.objects.create(name="user-app")
    for n, version in enumerate(("V1", "V2")):
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{n}.1", port=7201, version=version)  # fmt: skip
    release = services.create_release(
        service="user-app", to_version="V2", from_version=None, steps=[{"percent": 10}],
        analysis_settings=asdict(Settings()), actor="olga", source="api",
    )  # fmt: skip
    services.note(release, "analysis", ANALYSIS, actor="analysis")
    return release


@pytest.fixture
def analysed_release() -> Release:
    return make_analysed_release()


def test_a_revision_diff_shows_json_values(viewer):
    result = update_policy(
        {"enabled": True, "header": {"name": "gray", "value": "beta"}},
        partial=True, actor="olga", source="api", expected_revision=None,
    )  # fmt: skip
    page = viewer.get(f"/revisions/{result.revision.number}/").content.decode()
    assert '<td class="removed">false</td>' in page and '<td class="added">true</td>' in page
    assert '<td class="added">&quot;beta&quot;</td>' in page
    assert "True" not in page and "False" not in page


def test_a_draft_diff_shows_json_values(viewer, draft):  # noqa: F811
    page = viewer.get(f"/drafts/{draft.pk}/").content.decode()
    assert "<div>+ &quot;1001&quot;</div>" in page


def test_the_audit_log_shows_before_and_after_as_json(viewer):
    update_policy(
        {"enabled": True, "users": ["1001"]},
        partial=True, actor="olga", source="api", expected_revision=None,
    )  # fmt: skip
    page = viewer.get("/audit/").content.decode()
    before, after = (
        '<pre class="json small">{&quot;enabled&quot;: false, &quot;revision&quot;: 1, '
        "&quot;users&quot;: []}</pre>",
        '<pre class="json small">{&quot;enabled&quot;: true, &quot;revision&quot;: 2, '
        "&quot;users&quot;: [&quot;1001&quot;]}</pre>",
    )
    assert before in page and after in page


# The analysis' figures as stored and as shown; tests/browser/test_display_values.py holds
# static/js/numbers.js to the same.
FIGURES = [
    ("points", -0.2201, "−0.22 pts"),
    ("points", 1.5, "+1.5 pts"),
    ("points", 0.0012, "0 pts"),
    ("points", 12.3456, "+12.35 pts"),
    ("rate", 33.3333, "33.3 %"),
    ("rate", 50.0, "50 %"),
    ("rate", 0.0, "0 %"),
    ("rate", 0.01, "<0.1 %"),
    ("rate", None, "—"),
    ("ratio", 0.0002279, "2.3e-4"),
    ("ratio", 0.5347, "0.53"),
    ("ratio", 3.456, "3.5"),
    ("ratio", 46.3, "46"),
    ("ratio", 125000.0, "1.3e5"),
    ("ratio", 9.96e-5, "1.0e-4"),
    ("p_value", 0.0312, "p=0.03"),
    ("p_value", 0.00412, "p=0.004"),
    ("p_value", 0.000012, "p<0.001"),
    ("p_value", 1.0, "p=1"),
]


@pytest.mark.parametrize(("name", "value", "shown"), FIGURES)
def test_figures_are_rounded_for_people(name, value, shown):
    assert getattr(display, name)(value) == shown


def test_the_release_timeline_shows_rounded_figures(viewer, analysed_release):
    page = viewer.get(f"/releases/{analysed_release.pk}/").content.decode()
    assert "<td>300 req, 33.3 %</td>" in page and "<td>1200 req, 0.5 %</td>" in page
    assert "−0.22 pts, ratio 2.3e-4, p=0.03" in page


def test_an_insufficient_data_event_names_its_kind_once_in_words(viewer, analysed_release):
    services.note(analysed_release, "insufficient_data", INSUFFICIENT, actor="analysis")
    page = viewer.get(f"/releases/{analysed_release.pk}/").content.decode()
    kind = '<span class="release-event release-insufficient_data">insufficient data</span>'
    assert f"<td>{kind}</td>" in page
    healthy = '<span class="release-event release-analysis">analysis</span> <span class="muted">'
    assert f"<td>{healthy}healthy</span></td>" in page
