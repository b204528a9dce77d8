import copy

import pytest

from routing_engine import (
    DEFAULT_POLICY,
    PolicyError,
    canonical_json,
    checksum,
    diff_documents,
    merge_patch,
    normalize_policy,
)


def full(**overrides):
    return {**copy.deepcopy(DEFAULT_POLICY), **overrides}


def errors_of(document):
    with pytest.raises(PolicyError) as caught:
        normalize_policy(document)
    return caught.value.errors


def test_default_policy_is_valid_and_normalises_to_itself():
    assert normalize_policy(DEFAULT_POLICY) == DEFAULT_POLICY
    assert DEFAULT_POLICY["header"] == {"name": "", "value": ""}
    assert DEFAULT_POLICY["versions"] == {"prod": "V1", "gray": "V2"}


def test_contract_example_is_accepted_unchanged():
    document = {
        "enabled": True,
        "routing": True,
        "header": {"name": "gray", "value": "gray-996"},
        "ips": ["127.0.0.1", "10.1.0.0/16"],
        "cities": ["local"],
        "users": ["1001", "1002"],
        "user_header": "X-User-No",
        "city_header": "X-City",
        "percent": 0,
        "versions": {"prod": "V1", "gray": "V2"},
    }
    assert normalize_policy(document) == document


def test_normalisation_strips_dedups_and_canonicalises():
    result = normalize_policy(
        full(
            header={"name": " gray ", "value": " gray-996 "},
            ips=[
                " 127.0.0.1 ",
                "",
                "10.1.0.0/16",
                "127.0.0.1",
                "2001:DB8:0:0::1",
                "2001:db8::1/128",
                "10.9.9.9/32",
                "::ffff:10.2.0.0/112",
                "::FFFF:192.0.2.1",
                "10.1.0.0/255.255.0.0",
            ],
            cities=[" local ", "Local", "本地", "  "],
            users=["1001", " 1001", "1002", ""],
            versions={"prod": " V1 ", "gray": "V2\n"},
            percent=25.0,
        )
    )
    assert result["header"] == {"name": "gray", "value": "gray-996"}
    assert result["ips"] == [
        "127.0.0.1",
        "10.1.0.0/16",
        "2001:db8::1",
        "10.9.9.9",
        "10.2.0.0/16",
        "192.0.2.1",
    ]
    assert result["cities"] == ["local", "本地"]
    assert result["users"] == ["1001", "1002"]
    assert result["versions"] == {"prod": "V1", "gray": "V2"}
    assert result["percent"] == 25 and type(result["percent"]) is int


def test_empty_header_name_keeps_its_value():
    result = normalize_policy(full(header={"name": "", "value": "leftover"}))
    assert result["header"] == {"name": "", "value": "leftover"}


def test_result_is_a_copy():
    document = full(ips=["10.0.0.1"])
    normalize_policy(document)["ips"].append("10.0.0.2")
    assert document["ips"] == ["10.0.0.1"]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"enabled": None}, "enabled"),
        ({"routing": 0}, "routing"),
        ({"header": "gray"}, "header"),
        ({"header": {"name": "gray"}}, "header.value"),
        ({"header": {"name": "gray", "value": "x", "extra": 1}}, "header.extra"),
        ({"header": {"name": "gray", "value": ""}}, "header.value"),
        ({"header": {"name": "gray", "value": "a\r\nb"}}, "header.value"),
        ({"header": {"name": "gray header", "value": "x"}}, "header.name"),
        ({"header": {"name": "gray:", "value": "x"}}, "header.name"),
        ({"header": {"name": "grày", "value": "x"}}, "header.name"),
        ({"header": {"name": 7, "value": "x"}}, "header.name"),
        ({"ips": "127.0.0.1"}, "ips"),
        ({"ips": None}, "ips"),
        ({"ips": ["10.1.2.3/16"]}, "ips"),
        ({"ips": ["abc"]}, "ips"),
        ({"ips": ["10.0.0.0/33"]}, "ips"),
        ({"ips": ["300.1.1.1"]}, "ips"),
        ({"ips": ["fe80::1%eth0"]}, "ips"),
        ({"ips": [1]}, "ips"),
        ({"cities": "local"}, "cities"),
        ({"cities": ["x" * 257]}, "cities"),
        ({"users": [1001]}, "users"),
        ({"users": ["u" * 257]}, "users"),
        ({"user_header": ""}, "user_header"),
        ({"user_header": "X User"}, "user_header"),
        ({"city_header": "X-City:"}, "city_header"),
        ({"city_header": None}, "city_header"),
        ({"percent": -1}, "percent"),
        ({"percent": 101}, "percent"),
        ({"percent": 12.345}, "percent"),
        ({"percent": "50"}, "percent"),
        ({"percent": True}, "percent"),
        ({"percent": None}, "percent"),
        ({"versions": ["V1", "V2"]}, "versions"),
        ({"versions": {"prod": "V1"}}, "versions.gray"),
        ({"versions": {"prod": "", "gray": "V2"}}, "versions.prod"),
        ({"versions": {"prod": "V1", "gray": "  "}}, "versions.gray"),
        ({"versions": {"prod": "V1", "gray": 2}}, "versions.gray"),
        ({"versions": {"prod": "V1", "gray": " V1"}}, "versions"),
        ({"versions": {"prod": "V1", "gray": "V" * 257}}, "versions.gray"),
        ({"colour": "gray"}, "colour"),
    ],
)
def test_each_rule_names_its_field(overrides, field):
    errors = errors_of(full(**overrides))
    assert list(errors) == [field]
    assert all(isinstance(message, str) and message for message in errors[field])


def test_missing_fields_are_required():
    document = full()
    del document["percent"], document["users"]
    assert errors_of(document) == {
        "users": ["This field is required."],
        "percent": ["This field is required."],
    }


def test_not_an_object():
    assert "non_field_errors" in errors_of(["enabled"])


def test_ip_errors_name_each_offending_entry():
    errors = errors_of(full(ips=["10.1.2.3/16", "127.0.0.1", "abc", 42]))
    assert errors == {
        "ips": [
            "'10.1.2.3/16' has host bits set; did you mean 10.1.0.0/16?",
            "'abc' is not an IP address or CIDR.",
            "42 is not a string.",
        ]
    }


def test_every_problem_is_reported_at_once():
    errors = errors_of(
        full(
            enabled="true",
            header={"name": "bad name"},
            ips=["1.2.3.4/8"],
            percent=150,
            versions={"prod": "V1", "gray": "V1"},
            surprise=True,
        )
    )
    assert set(errors) == {
        "enabled",
        "header.name",
        "header.value",
        "ips",
        "percent",
        "versions",
        "surprise",
    }


def test_policy_error_is_a_value_error_with_the_errors():
    error = PolicyError({"ips": ["bad"]})
    assert isinstance(error, ValueError)
    assert error.errors == {"ips": ["bad"]}


def test_merge_patch_replaces_top_level_and_merges_header_and_versions():
    current = normalize_policy(
        full(header={"name": "gray", "value": "a"}, ips=["10.0.0.1", "10.0.0.2"])
    )
    merged = merge_patch(current, {"header": {"value": "b"}, "ips": ["10.0.0.3"]})
    assert merged["header"] == {"name": "gray", "value": "b"}
    assert merged["ips"] == ["10.0.0.3"]
    assert merge_patch(current, {"versions": {"gray": "V3"}})["versions"] == {
        "prod": "V1",
        "gray": "V3",
    }
    assert current["header"]["value"] == "a"  # the current document is left alone


def test_merge_patch_leaves_validation_to_normalize_policy():
    merged = merge_patch(DEFAULT_POLICY, {"colour": "gray", "header": None})
    assert set(errors_of(merged)) == {"colour", "header"}
    with pytest.raises(PolicyError):
        merge_patch(DEFAULT_POLICY, ["enabled"])


def test_checksum_does_not_depend_on_key_order():
    one = {"a": 1, "b": {"x": [1, 2], "y": "本地"}}
    two = {"b": {"y": "本地", "x": [1, 2]}, "a": 1}
    assert canonical_json(one) == canonical_json(two) == '{"a":1,"b":{"x":[1,2],"y":"本地"}}'
    assert checksum(one) == checksum(two)
    assert len(checksum(one)) == 64
    assert checksum(one) != checksum({**one, "a": 2})
    # A known value, so checksums stay comparable across releases of this code.
    assert checksum({}) == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def test_diff_of_lists_and_scalars():
    old = normalize_policy(full(ips=["10.0.0.1", "10.0.0.2"]))
    new = normalize_policy(
        full(
            enabled=True,
            ips=["10.0.0.2", "10.0.0.3"],
            header={"name": "gray", "value": "x"},
        )
    )
    assert diff_documents(old, new) == [
        {"field": "enabled", "before": False, "after": True},
        {"field": "header.name", "before": "", "after": "gray"},
        {"field": "header.value", "before": "", "after": "x"},
        {"field": "ips", "added": ["10.0.0.3"], "removed": ["10.0.0.1"]},
    ]
    assert diff_documents(new, new) == []


def test_diff_ignores_list_order():
    assert diff_documents({"ips": ["a", "b"]}, {"ips": ["b", "a"]}) == []


def test_diff_from_nothing_adds_everything():
    assert diff_documents(
        None, {"enabled": True, "ips": ["10.0.0.1"], "header": {"name": "g"}}
    ) == [
        {"field": "enabled", "before": None, "after": True},
        {"field": "ips", "added": ["10.0.0.1"], "removed": []},
        {"field": "header.name", "before": None, "after": "g"},
    ]


def test_diff_of_nested_documents():
    old = {"gray": {"percent": 0}, "services": {"user-app": {"prod": "V1", "gray": "V2"}}}
    new = {
        "gray": {"percent": 10},
        "services": {
            "user-app": {"prod": "V1", "gray": "V3"},
            "order-app": {"prod": "V1", "gray": "V2"},
        },
    }
    assert diff_documents(old, new) == [
        {"field": "gray.percent", "before": 0, "after": 10},
        {"field": "services.user-app.gray", "before": "V2", "after": "V3"},
        {"field": "services.order-app.prod", "before": None, "after": "V1"},
        {"field": "services.order-app.gray", "before": None, "after": "V2"},
    ]
    assert diff_documents(new, old)[-2:] == [
        {"field": "services.order-app.prod", "before": "V1", "after": None},
        {"field": "services.order-app.gray", "before": "V2", "after": None},
    ]


def test_diff_of_lists_of_objects_and_type_changes():
    instance = {"id": "a", "port": 1}
    assert diff_documents({"x": [instance]}, {"x": [{**instance, "port": 2}]}) == [
        {"field": "x", "added": [{"id": "a", "port": 2}], "removed": [instance]}
    ]
    assert diff_documents({"x": 1}, {"x": True}) == [{"field": "x", "before": 1, "after": True}]
    assert diff_documents({"x": "a"}, {"x": ["a"]}) == [
        {"field": "x", "before": "a", "after": ["a"]}
    ]
