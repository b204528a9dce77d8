"""Values on the pages read as JSON and as rounded figures: a revision's or a draft's diff
and the audit log show `false` and `"1001"`, not Python's `False` and `1001`."""

import pytest
from django.test import Client

from dashboard.tests.test_drafts_pages import draft, olga  # noqa: F401 (fixtures)
from policy.services import update_policy

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(make_user) -> Client:
    client = Client()
    client.force_login(make_user("vera", "viewer"))
    return client


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
