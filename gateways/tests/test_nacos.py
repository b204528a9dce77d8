"""Nacos mode: the document as the reference design's YAML, published to a Nacos config center (the
contract fake) and read back; acked only when the stored md5 is the published one."""

import json

import pytest
import yaml

from gateways import generation, yaml_layout
from gateways.models import Gateway
from testing.fakes.nacos_config_fake import FakeNacosConfig
from testing.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_yaml_has_the_seeds_layout(make_gateway):
    document = json.loads(generation.current().body)
    document["gray"].update(
        header={"name": "gray", "value": "gray-996"},
        ips=["127.0.0.1"],
        cities=["本地"],
        users=["1001"],
    )
    document["services"] = {
        "user-app": {"prod": "V1", "gray": "V3", "instances": []},
        "order-app": {"prod": "V1", "gray": "V2", "instances": []},
    }
    text = yaml_layout.render(document, "kerwin.tool")
    assert "本地" in text, "readable UTF-8, as people write these files"
    tree = yaml.safe_load(text)
    gray = tree["kerwin"]["tool"]["gray"]
    assert gray["load"] is document["gray"]["routing"]
    assert gray["version"] == {"prodVersion": "V1", "grayVersion": "V2"}
    assert gray["gateway"] == {
        "enabled": document["gray"]["enabled"],
        "grayHeadKey": "gray",
        "grayHeadValue": "gray-996",
        "grayIPList": ["127.0.0.1"],
        "grayCityList": ["本地"],
        "grayUserList": ["1001"],
        "grayUserHeader": document["gray"]["user_header"],
        "grayCityHeader": document["gray"]["city_header"],
        "grayPercent": document["gray"]["percent"],
    }
    assert gray["services"] == {"user-app": {"prodVersion": "V1", "grayVersion": "V3"}}
    assert tree["graylane"]["generation"] == document["generation"]
    assert yaml.safe_load(yaml_layout.render(document))["gray"] == gray


@pytest.fixture
def nacos():
    with FakeNacosConfig(username="nacos", password="nacos-pw") as fake:
        yield fake


def make_nacos_gateway(make_gateway, nacos) -> Gateway:
    gateway, _, _ = make_gateway(
        "scg",
        Gateway.NACOS,
        nacos.url,
        namespace="dev",
        yaml_prefix="kerwin.tool",
        nacos_username="nacos",
        nacos_password="nacos-pw",
    )
    return gateway


@pytest.fixture
def nacos_gateway(make_gateway, nacos):
    return make_nacos_gateway(make_gateway, nacos)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["1.x", "2.x", "3.x"])
def test_a_nacos_gateway_gets_the_yaml_published_and_confirmed(
    celery_worker, make_gateway, version
):
    with FakeNacosConfig(version=version, username="nacos", password="nacos-pw") as nacos:
        gateway = make_nacos_gateway(make_gateway, nacos)
        number = generation.bump("test")
        wait_until(
            lambda: Gateway.objects.filter(pk=gateway.pk, acked_generation=number).exists(),
            what="the read-back confirmation",
        )
        stored = nacos.config("gateway-app.yaml", "DEFAULT_GROUP", "dev")
        assert stored == yaml_layout.render(json.loads(generation.current().body), "kerwin.tool")
        assert yaml.safe_load(stored)["graylane"]["generation"] == number
        assert nacos.requests_to("/v1/auth/login"), "credentials are used to log in"
        published = nacos.requests_to("/v1/cs/configs", "POST")[-1]
        assert published["type"] == "yaml"
        assert published["accessToken"]


@pytest.mark.slow
def test_other_content_read_back_means_failing(celery_worker, nacos, nacos_gateway):
    nacos.put_config("gateway-app.yaml", "DEFAULT_GROUP", "dev", "someone: else\n")
    nacos.lose_writes = True
    number = generation.bump("test")
    gateway = wait_until(
        lambda: Gateway.objects.filter(pk=nacos_gateway.pk, attempts__gte=1).first(),
        what="a failed attempt",
    )
    assert "md5" in gateway.last_error
    assert gateway.status_at(number, gateway.last_attempt_at) == "failing"
    assert gateway.acked_generation < number


@pytest.mark.slow
def test_a_wrong_password_means_failing_with_the_reason(celery_worker, nacos, nacos_gateway):
    Gateway.objects.filter(pk=nacos_gateway.pk).update(nacos_password="wrong")
    generation.bump("test")
    gateway = wait_until(
        lambda: Gateway.objects.filter(pk=nacos_gateway.pk, attempts__gte=1).first(),
        what="a failed attempt",
    )
    assert "login failed" in gateway.last_error
    assert nacos.config("gateway-app.yaml", "DEFAULT_GROUP", "dev") is None


@pytest.mark.slow
def test_a_nacos_endpoint_at_a_metadata_address_is_never_published_to(celery_worker, make_gateway):
    gateway, _, _ = make_gateway("meta", Gateway.NACOS, "http://169.254.169.254:8848/nacos")
    generation.bump("test")
    failed = wait_until(
        lambda: Gateway.objects.filter(pk=gateway.pk, attempts__gte=1).first(),
        what="a failed attempt",
    )
    assert "169.254.169.254 is a cloud metadata address: refused" in failed.last_error


@pytest.mark.slow
def test_a_nacos_gateway_runs_the_gray_lane_and_says_what_it_cannot_carry(
    celery_worker, nacos, nacos_gateway
):
    from policy.services import create_lane, quarantine_version
    from registry_sync.models import Service

    Service.objects.create(name="user-app")
    create_lane("feature-x", {"priority": 100, "members": {"user-app": "V3"}}, actor="a",
                source="api")  # fmt: skip
    quarantine_version("user-app", "V2", actor="a", source="api")
    number = generation.bump("test")
    gateway = wait_until(
        lambda: Gateway.objects.filter(pk=nacos_gateway.pk, acked_generation=number).first(),
        what="the read-back confirmation",
    )
    assert gateway.status_at(number, gateway.last_attempt_at) == "in_sync"
    records = {entry["record"]: entry["reason"] for entry in gateway.skipped}
    assert set(records) == {"lanes[feature-x]", "services.user-app.quarantined"}
    assert "gray lane only" in records["lanes[feature-x]"]
    stored = yaml.safe_load(nacos.config("gateway-app.yaml", "DEFAULT_GROUP", "dev"))
    assert "lanes" not in stored["kerwin"]["tool"]["gray"]
