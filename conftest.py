"""Fixtures shared by every app's tests, and the check that keeps the test tiers honest."""

import pytest
import pytest_asyncio

# Fixtures that start processes or servers (uvicorn, a Celery worker, the gateway lab, the
# demo's dashboard): a test using one is `slow`, and one driving chromium is `browser`, so
# `make test-fast` (-m "not slow and not browser") never runs it.
SLOW_FIXTURES = {"server", "lab", "celery_worker", "asgi_server", "dashboard"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test is checked
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = [
        f"{item.nodeid} (wants {mark})"
        for item in items
        for mark, fixtures in (("slow", SLOW_FIXTURES), ("browser", {"browser"}))
        if fixtures & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker(mark)
    ]
    if unmarked:
        raise pytest.UsageError("tests not marked for their tier:\n" + "\n".join(unmarked))


@pytest.fixture
def make_user(db):
    """A user holding `role` (or none), with password 'pw-for-tests'."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    def make(username: str, role: str | None = None):
        user = get_user_model().objects.create_user(username=username, password="pw-for-tests")
        if role:
            # get_or_create: transactional tests flush the groups the migration made.
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        return user

    return make


@pytest.fixture
def api(make_user):
    """`api("operator")`: a DRF client authenticated with a real API token of that role."""
    from rest_framework.test import APIClient

    from accounts.models import ApiToken

    def client(role: str | None, username: str | None = None) -> APIClient:
        user = make_user(username or f"{role or 'norole'}-user", role)
        _, key = ApiToken.objects.issue(user)
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        c.user = user
        return c

    return client


@pytest_asyncio.fixture
async def db_thread_closer():
    """Async tests reach the database through sync_to_async's worker thread; close that
    thread's connection so the test database can be dropped afterwards."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()
