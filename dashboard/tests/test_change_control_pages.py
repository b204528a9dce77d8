"""The browser editors under change control: a freeze window's refusal shown on the form,
nothing saved; a change of a protected service kept as a draft."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.tests.test_policy_editor import form_data
from policy.models import Freeze, PolicyDraft
from policy.publishing import load_state
from registry_sync.models import Instance, Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator_client(client, make_user):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    service = Service.objects.create(name="user-app")
    for index, version in enumerate(("V1", "V2")):  # the default prod and gray versions
        Instance.objects.create(service=service, instance_id=f"user-app-{version}",
                                host=f"10.0.{index}.1", port=7201, version=version,
                                state="UP")  # fmt: skip
    return client


def test_the_policy_editor_shows_a_freeze_refusal_inline(operator_client):
    now = timezone.now()
    Freeze.objects.create(starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1),
                          reason="Black Friday")  # fmt: skip
    state = load_state()
    response = operator_client.post("/policy/", form_data(state, users="1001", action="save"))
    assert response.status_code == 409
    errors = response.context["form"].non_field_errors()
    assert len(errors) == 1 and "user-app is frozen" in errors[0] and "Black Friday" in errors[0]
    assert "Black Friday" in response.content.decode()
    assert load_state().revision == state.revision


def test_a_protected_services_change_from_the_editor_waits_as_a_draft(operator_client):
    Service.objects.filter(name="user-app").update(protected=True)
    state = load_state()
    response = operator_client.post(
        "/policy/", form_data(state, users="1001", action="save"), follow=True
    )
    draft = PolicyDraft.objects.get()
    assert (draft.author, draft.source, draft.state) == ("olga", "ui", "pending")
    assert f"draft {draft.pk}" in response.content.decode()
    assert load_state().revision == state.revision
