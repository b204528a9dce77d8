"""Per-instance traffic: a sample may split its requests by the instance that answered
(`instances`); a gateway that does not tell is still taken. What is counted, once per
gateway and second on both backends, is each instance's last minute on the service page."""

import re
import time

import pytest

from metrics import services
from metrics.tests.conftest import post, sample

pytestmark = pytest.mark.django_db

SPLIT = [
    {"address": "10.0.0.1:7201", "total": 70, "errors": 7},
    {"address": "10.0.0.2:7201", "total": 30, "errors": 0},
]


def test_a_sample_without_instances_is_taken_as_before(windows, gateway):
    name, client = gateway
    answer = post(client, name, sample())
    assert answer.status_code == 202 and answer.json()["accepted"] == 1
    assert services.instance_traffic("user-app") == {}


def test_each_instance_counts_once_per_gateway_and_second(windows, gateway):
    name, client = gateway
    now = int(time.time())
    assert post(client, name, sample(now - 1, errors=7, instances=SPLIT)).status_code == 202
    assert post(client, name, sample(now - 1, errors=7, instances=SPLIT)).json()["duplicates"] == 1
    assert (
        post(client, name, sample(now, total=100, errors=0, instances=SPLIT[1:])).status_code == 202
    )
    traffic = services.instance_traffic("user-app", now)
    assert set(traffic) == {"10.0.0.1:7201", "10.0.0.2:7201"}
    first, second = traffic["10.0.0.1:7201"], traffic["10.0.0.2:7201"]
    assert (first.requests, first.per_second, first.success_rate) == (70, 1.17, 90.0)
    assert (second.requests, second.success_rate) == (60, 100.0)
    # A minute later, out of the window.
    assert services.instance_traffic("user-app", now + 61) == {}


def test_below_fifty_requests_an_instance_has_no_rate(windows, gateway):
    name, client = gateway
    split = [{"address": "10.0.0.1:7201", "total": 12, "errors": 1}]
    assert post(client, name, sample(total=12, errors=1, instances=split)).status_code == 202
    (only,) = services.instance_traffic("user-app").values()
    assert (only.requests, only.success_rate) == (12, None)


def test_withdrawn_samples_take_their_instances_off(windows):
    from metrics.samples import Sample

    now = int(time.time())
    told = Sample("user-app", "V1", now, 10, 0, 5.0, instances=(("10.0.0.1:7201", 10, 0),))
    windows.accept("gw-1", [told])
    windows.withdraw("gw-1", [told])
    assert windows.by_instance("user-app", now - 5, now) == {}
    windows.accept("gw-1", [told])
    assert windows.by_instance("user-app", now - 5, now)["10.0.0.1:7201"].total == 10


@pytest.mark.parametrize(
    "instances, field_error",
    [
        ([{"address": "10.0.0.1", "total": 1, "errors": 0}], "Expected host:port."),
        ([{"address": "10.0.0.1:99999", "total": 1, "errors": 0}], "Expected host:port."),
        ([{"address": "a b:80", "total": 1, "errors": 0}], "No spaces or control characters."),
        ([{"address": "h:80", "total": 2, "errors": 3}], "More errors than requests (total)."),
        ([{"address": "h:80", "total": 1, "errors": 0, "weight": 1}], "Unknown field."),
        ([{"address": "h:80", "total": 60, "errors": 0}] * 2, "An address twice."),
        (
            [{"address": "h:80", "total": 101, "errors": 0}],
            "More requests than the sample's total.",
        ),
        ([{"address": "h:80", "total": 50, "errors": 9}], "More errors than the sample's."),
        ([{"address": f"h:{n + 1}", "total": 0, "errors": 0} for n in range(201)], "At most 200"),
    ],
)
def test_a_wrong_split_refuses_the_request_and_stores_nothing(
    windows, gateway, instances, field_error
):
    name, client = gateway
    answer = post(client, name, sample(errors=5, instances=instances))
    assert answer.status_code == 400
    assert field_error in str(answer.json())
    assert services.instance_traffic("user-app") == {}


def test_the_service_page_shows_each_instances_last_minute(windows, gateway, client, make_user):
    from registry_sync.models import Instance, Service

    service = Service.objects.get(name="user-app")
    for n, host in enumerate(["10.0.0.1", "10.0.0.2", "10.0.0.3"]):
        Instance.objects.create(service=service, instance_id=f"i{n}", host=host, port=7201,
                                version="V1", state="UP")  # fmt: skip
    name, gateway_client = gateway
    split = [{"address": "10.0.0.1:7201", "total": 120, "errors": 6},
             {"address": "10.0.0.2:7201", "total": 12, "errors": 0}]  # fmt: skip
    assert (
        post(gateway_client, name, sample(total=132, errors=6, instances=split)).status_code == 202
    )
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/services/user-app/").content.decode()
    cells = re.findall(r'<td data-field="traffic">(.*?)</td>', page)
    assert [re.sub(r"<[^>]+>", "", cell) for cell in cells] == [
        "2.0/s · 95 %",
        "0.2/s · — (12 requests)",
        "—",
    ]
