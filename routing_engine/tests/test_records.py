"""The record rules every reader of a gateway document shares (routing_engine.records)."""

import pytest

from routing_engine.records import host_problem, read_instances, read_services, usable_version


@pytest.mark.parametrize(
    "value, version",
    [
        ("V1", "V1"),
        (" V2 ", "V2"),
        (None, None),
        ("", None),
        (" \t", None),
        ("V1\n", "V1"),  # surrounding blanks go, as in a policy's versions
        ("V\n1", None),
        ("V" * 64, "V" * 64),
        ("V" * 65, None),
        (1, None),
        (["V1"], None),
    ],
)
def test_a_usable_version(value, version):
    assert usable_version(value) == version


@pytest.mark.parametrize(
    "host, ok",
    [
        ("10.0.0.1", True),
        ("::1", True),
        ("fe80::1%eth0", False),
        ("order-app.internal", True),
        ("10.0.0.256", False),
        ("a b", False),
        ("x" * 254, False),
        ("", False),
        (3, False),
    ],
)
def test_a_host(host, ok):
    assert (host_problem(host) is None) == ok


def test_a_list_keeps_its_usable_instances_in_order_and_names_the_rest():
    instances, skipped = read_instances(
        "services.s",
        [
            {"id": "a", "host": "10.0.0.1", "port": 1, "version": "V1"},
            {"host": "10.0.0.2", "port": 2, "version": None, "weight": 0},
            {"id": 7, "host": "10.0.0.3", "port": 3},
            {"id": "d", "host": "10.0.0.4", "port": 65536},
        ],
    )
    assert [(i.id, i.version, i.weight) for i in instances] == [
        ("a", "V1", 1.0),
        ("10.0.0.2:2", None, 0.0),
    ]
    assert [(s.record, s.reason) for s in skipped] == [
        ("services.s.instances[2]", "id: 7 is not an instance id"),
        ("services.s.instances[d]", "port: 65536 is not a port"),
    ]


def test_a_service_entry_reads_its_quarantined_versions_and_skips_a_bad_list_alone():
    entry = {"prod": "V1", "gray": "V2", "instances": [], "quarantined": ["V3", " V4 "]}
    read = read_services({"user-app": entry, "order-app": {**entry, "quarantined": "V3"}})
    assert read.entries["user-app"].quarantined == {"V3", "V4"}
    assert read.entries["order-app"].quarantined == frozenset()  # the rest of it is used
    assert [(s.record, s.reason) for s in read.skipped] == [
        (
            "services.order-app.quarantined",
            "'V3' is not a list of versions; ignored (the document leaves out their "
            "instances all the same)",
        )
    ]
    assert (
        read_services({"s": {**entry, "quarantined": [""]}})
        .skipped[0]
        .reason.startswith("'' is empty, not a version;")
    )
