"""Fixtures shared by every app's tests."""

import pytest


@pytest.fixture
def make_user(db):
    """A user holding `role` (or none), with password 'pw-for-tests'."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    def make(username: str, role: str | None = None):
        user = get_user_model().objects.create_user(username=username, password="pw-for-tests")
        if role:
            user.groups.add(Group.objects.get(name=role))
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
