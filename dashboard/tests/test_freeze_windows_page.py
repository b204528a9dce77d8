"""Freeze windows on the releases page: an admin makes one (the API's validation, shown on
the fields) and ends or removes one (audited); everyone else sees the windows, no form and
no buttons."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEntry
from policy.models import Freeze
from registry_sync.models import Service

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(make_user):
    client = Client()
    client.force_login(make_user("ada", "admin"))
    return client


@pytest.fixture
def operator(make_user):
    client = Client()
    client.force_login(make_user("olga", "operator"))
    return client


def window(start: timedelta, end: timedelta, reason: str = "Black Friday") -> Freeze:
    now = timezone.now()
    return Freeze.objects.create(starts_at=now + start, ends_at=now + end, reason=reason)


def test_an_admin_makes_a_window_and_it_is_listed(admin):
    Service.objects.create(name="user-app")
    response = admin.post(
        "/releases/freezes/",
        {"starts_at": "2031-12-24T00:00", "ends_at": "2031-12-27T06:00",
         "services": "user-app, ", "reason": "Holidays"},
        follow=True,
    )  # fmt: skip
    assert response.redirect_chain == [("/releases/", 302)]
    freeze = Freeze.objects.get()
    assert (freeze.starts_at, freeze.ends_at) == (
        datetime(2031, 12, 24, tzinfo=UTC),
        datetime(2031, 12, 27, 6, tzinfo=UTC),
    )
    assert (freeze.services, freeze.reason, freeze.created_by) == (["user-app"], "Holidays", "ada")
    page = response.content.decode()
    assert f"Freeze window {freeze.pk} made" in page
    assert f'data-freeze-id="{freeze.pk}"' in page and 'data-action="remove"' in page
    entry = AuditEntry.objects.get(action="freeze.create")
    assert (entry.actor, entry.source) == ("ada", "ui")


def test_bad_input_is_shown_on_its_fields_and_nothing_is_made(admin):
    response = admin.post(
        "/releases/freezes/",
        {"starts_at": "2031-12-24T00:00", "ends_at": "2031-12-23T00:00", "services": "nope"},
    )
    assert response.status_code == 400
    form = response.context["freeze_form"]
    assert form.errors["services"] == ["No service named: nope."]
    assert form.errors["reason"] == ["This field is required."]
    assert '<details class="freeze-form" open>' in response.content.decode()
    response = admin.post(
        "/releases/freezes/",
        {"starts_at": "tomorrow", "ends_at": "2031-12-23T00:00", "reason": "x"},
    )
    assert "Datetime has wrong format" in response.context["freeze_form"].errors["starts_at"][0]
    response = admin.post(
        "/releases/freezes/",
        {"starts_at": "2031-12-24T00:00", "ends_at": "2031-12-23T00:00", "reason": "x"},
    )
    assert response.context["freeze_form"].errors["ends_at"] == ["Must be after starts_at."]
    assert not Freeze.objects.exists()


def test_an_admin_ends_a_window_under_way_and_removes_one_ahead(admin):
    current = window(timedelta(hours=-1), timedelta(hours=2))
    ahead = window(timedelta(days=1), timedelta(days=2), reason="Payroll run")
    page = admin.get("/releases/").content.decode()
    assert 'data-action="end"' in page and 'data-action="remove"' in page

    response = admin.post(f"/releases/freezes/{current.pk}/end/", follow=True)
    assert f"Freeze window {current.pk} ended now." in response.content.decode()
    current.refresh_from_db()
    assert current.ends_at <= timezone.now()
    assert f'data-freeze-id="{current.pk}"' not in response.content.decode()

    response = admin.post(f"/releases/freezes/{ahead.pk}/end/", follow=True)
    assert f"Freeze window {ahead.pk} removed (it had not begun)." in response.content.decode()
    assert not Freeze.objects.filter(pk=ahead.pk).exists()
    assert [e.action for e in AuditEntry.objects.order_by("id")] == ["freeze.end", "freeze.delete"]

    response = admin.post(f"/releases/freezes/{current.pk}/end/", follow=True)
    assert f"Freeze window {current.pk} is over already." in response.content.decode()


def test_an_operator_sees_the_windows_but_cannot_make_or_end_one(operator):
    freeze = window(timedelta(hours=-1), timedelta(hours=2))
    page = operator.get("/releases/").content.decode()
    assert f'data-freeze-id="{freeze.pk}"' in page and "Black Friday" in page
    assert 'id="freeze-form"' not in page and 'data-action="end"' not in page
    made = operator.post(
        "/releases/freezes/",
        {"starts_at": "2031-12-24T00:00", "ends_at": "2031-12-27T00:00", "reason": "mine"},
    )
    assert made.status_code == 403
    assert operator.post(f"/releases/freezes/{freeze.pk}/end/").status_code == 403
    assert Freeze.objects.count() == 1 and Freeze.objects.get().ends_at > timezone.now()
