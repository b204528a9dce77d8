""" "Restart instance" on the service page (demo/restart.py): SIGTERM to the real
demo instance process serving that port, only with DEMO_RESTART on, operators only, and
never to a process that is not a demo instance."""

import pytest
from django.test import override_settings

from audit.models import AuditEntry
from registry_sync.models import Instance, Service
from testing.demo_processes import DemoInstance
from testing.fakes.nacos_fake import FakeNacos

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture
def operator(client, make_user):
    make_user("olga", "operator")
    client.login(username="olga", password="pw-for-tests")
    return client


def row_for(port: int, host: str = "127.0.0.1") -> Instance:
    service, _ = Service.objects.get_or_create(name="user-app")
    return Instance.objects.create(
        service=service, instance_id=f"{host}#{port}", host=host, port=port, version="V1"
    )


@override_settings(DEMO_RESTART=True)
def test_restart_sends_sigterm_to_the_demo_process_of_that_port(operator):
    with FakeNacos() as nacos:
        instance = DemoInstance(nacos.url.removesuffix("/nacos"), "user-app", "V1").start()
        try:
            row = row_for(instance.port)
            page = operator.get("/services/user-app/").content.decode()
            assert "Restart instance" in page
            response = operator.post(f"/instances/{row.pk}/restart/", follow=True)
            assert "got SIGTERM" in response.content.decode()
            assert instance.popen.wait(15) is not None  # it drained and exited
        finally:
            instance.stop()
    entry = AuditEntry.objects.get(action="instance.restart")
    assert entry.actor == "olga" and "127.0.0.1" in entry.object


def test_without_demo_restart_nothing_is_offered_or_signalled(operator):
    row = row_for(7999)
    assert "Restart instance" not in operator.get("/services/user-app/").content.decode()
    response = operator.post(f"/instances/{row.pk}/restart/", follow=True)
    assert "DEMO_RESTART" in response.content.decode()
    assert not AuditEntry.objects.filter(action="instance.restart").exists()


@override_settings(DEMO_RESTART=True)
def test_only_loopback_demo_processes_and_only_operators(operator, client, make_user):
    remote = row_for(7201, host="10.0.0.5")
    answer = operator.post(f"/instances/{remote.pk}/restart/", follow=True).content.decode()
    assert "not on this machine" in answer
    nobody = row_for(9)  # nothing serves port 9 here
    answer = operator.post(f"/instances/{nobody.pk}/restart/", follow=True).content.decode()
    assert "No demo instance process serves port 9" in answer
    make_user("vera", "viewer")
    client.logout()
    client.login(username="vera", password="pw-for-tests")
    assert client.post(f"/instances/{nobody.pk}/restart/").status_code == 403
    assert not AuditEntry.objects.filter(action="instance.restart").exists()
