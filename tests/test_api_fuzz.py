"""Property-based fuzzing of every operation in our OpenAPI document (schemathesis): no
input, however odd, may produce a server error or an answer that breaks the schema.

It runs as an operator: admin-only operations (registries, gateways) answer 403 here, so
the fuzzer never stores a registry or gateway URL that a later job could call; so do the
endpoints for gateways' own tokens (config, ack)."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from graylane.wsgi import application

pytestmark = pytest.mark.slow

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.fixture
def keep_test_connection():
    # Like Django's test client: requests must not close the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def operator_token(make_user, keep_test_connection):
    from accounts.models import ApiToken
    from registry_sync.models import Instance, Service

    service = Service.objects.create(name="user-app")
    Instance.objects.create(service=service, instance_id="i-1", host="127.0.0.1", port=1)
    user = make_user("fuzzer", "operator")
    return ApiToken.objects.issue(user)[1]


@pytest.mark.django_db(transaction=True)  # gateway calls read in threads of their own
@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_server_errors(case, operator_token):
    response = case.call(headers={"Authorization": f"Token {operator_token}"})
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
