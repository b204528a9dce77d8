import pytest

from registry_sync.models import Registry
from testing.fakes.nacos_fake import FakeNacos


@pytest.fixture(params=["1.x", "2.x", "3.x"])
def nacos(request):
    with FakeNacos(version=request.param) as fake:
        fake.add_instance("user-app", "10.0.0.1", 7201, metadata={"version": "V1"})
        fake.add_instance("user-app", "10.0.0.2", 7201, metadata={"version": "V2"})
        fake.add_instance("order-app", "10.0.1.1", 7301, metadata={"version": "V1"})
        yield fake


@pytest.fixture
def nacos_registry(nacos):
    return Registry.objects.create(name="nacos", kind="nacos", base_url=nacos.url)
