from routing_engine import rebase_policy

BASE = {"users": ["1", "2"], "ips": [], "percent": 0, "header": {"name": "gray", "value": "a"}}


def test_fields_changed_by_one_side_take_that_side():
    ours = {**BASE, "percent": 5}
    theirs = {**BASE, "ips": ["10.0.0.0/8"]}
    merged, clashes = rebase_policy(BASE, ours, theirs)
    assert merged == {**BASE, "percent": 5, "ips": ["10.0.0.0/8"]} and clashes == []


def test_list_edits_of_both_sides_survive():
    ours = {**BASE, "users": ["2", "3"]}  # removed 1, added 3
    theirs = {**BASE, "users": ["1", "2", "4"]}  # added 4
    merged, clashes = rebase_policy(BASE, ours, theirs)
    assert merged["users"] == ["2", "4", "3"] and clashes == []


def test_a_scalar_both_changed_is_ours_and_reported_with_its_path():
    ours = {**BASE, "header": {"name": "gray", "value": "b"}}
    theirs = {**BASE, "header": {"name": "gray", "value": "c"}, "percent": 9}
    merged, clashes = rebase_policy(BASE, ours, theirs)
    assert merged["header"] == {"name": "gray", "value": "b"} and merged["percent"] == 9
    assert clashes == ["header.value"]
