import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from registry_sync.models import Instance, Registry
from testing.fakes.nacos_fake import FakeNacos

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("sync_registry", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_one_sync_prints_a_summary_per_registry():
    Registry.objects.all().delete()
    with FakeNacos() as nacos:
        for n in range(3):
            nacos.add_instance(f"svc-{n}", "10.0.0.1", 8000 + n, metadata={"version": "V1"})
        Registry.objects.create(name="nacos", kind="nacos", base_url=nacos.url)
        out, _ = run("--registry", "nacos")
        assert "nacos: 3 added, 0 changed, 0 gone, 0 unchanged" in out
        out, _ = run()
        assert "nacos: 0 added, 0 changed, 0 gone, 3 unchanged" in out
    assert Instance.objects.count() == 3


def test_a_failing_registry_is_reported_and_marked_stale(settings):
    settings.REGISTRY_TIMEOUT = 0.5
    with FakeNacos() as nacos:
        Registry.objects.create(name="broken", kind="nacos", base_url=nacos.url)
        nacos.fail_with(500)
        with pytest.raises(CommandError, match="broken"):
            run("--registry", "broken")
    assert Registry.objects.get(name="broken").stale


def test_an_unknown_registry_name_is_an_error():
    with pytest.raises(CommandError, match="No registry named 'nope'"):
        run("--registry", "nope")
