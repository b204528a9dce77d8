import ipaddress
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from routing_engine import ALL, GRAY, PROD, Decision, GrayMatcher, lower_headers

# Every test here on the C primitives and on the pure Python fallback (conftest.engine).
pytestmark = pytest.mark.usefixtures("engine")

REPO = Path(__file__).resolve().parents[2]


def decide(matcher, headers=None, **kwargs):
    return matcher.decide(lower_headers(headers or {}), **kwargs)


def test_disabled_policy_decides_all_whatever_matches(policy):
    matcher = GrayMatcher(policy(header={"name": "gray", "value": "x"}, ips=["0.0.0.0/0"]))
    assert decide(matcher, {"gray": "x"}, ip="1.2.3.4") == Decision(ALL, None)


def test_header_must_equal_the_configured_value_exactly(policy):
    matcher = GrayMatcher(policy(enabled=True, header={"name": "X-Canary", "value": "yes"}))
    assert decide(matcher, {"x-canary": "yes"}).matched == "header"
    assert decide(matcher, {"X-CANARY": "yes"}).matched == "header"
    assert decide(matcher, {"X-Canary": "YES"}).flag == PROD
    assert decide(matcher, {"X-Canary": "yes "}).flag == PROD
    assert decide(matcher, {}).flag == PROD


def test_empty_header_name_means_no_header_rule(policy):
    matcher = GrayMatcher(policy(enabled=True, header={"name": "", "value": ""}))
    assert decide(matcher, {"": ""}).flag == PROD


def test_rules_are_tried_in_the_seed_order(policy):
    matcher = GrayMatcher(
        policy(
            enabled=True,
            header={"name": "gray", "value": "on"},
            ips=["10.0.0.1"],
            cities=["local"],
            users=["1001"],
            percent=100,
        )
    )
    everything = {"gray": "on", "X-City": "local", "X-User-No": "1001"}
    assert decide(matcher, everything, ip="10.0.0.1").matched == "header"
    assert decide(matcher, {**everything, "gray": "off"}, ip="10.0.0.1").matched == "ip"
    assert decide(matcher, {**everything, "gray": "off"}, ip="10.0.0.2").matched == "city"
    assert decide(matcher, {"X-User-No": "1001"}, ip="10.0.0.2").matched == "user"
    assert decide(matcher, {"X-User-No": "2002"}, ip="10.0.0.2").matched == "percent"


def test_users_match_exactly_from_header_or_argument(policy):
    matcher = GrayMatcher(policy(enabled=True, users=["1001", "alice"], user_header="X-Uid"))
    assert decide(matcher, {"X-Uid": "1001"}) == Decision(GRAY, "user")
    assert decide(matcher, user="alice") == Decision(GRAY, "user")
    assert decide(matcher, {"X-Uid": "Alice"}).flag == PROD
    assert decide(matcher, {"X-Uid": "10011"}).flag == PROD
    # The default header is not consulted once the policy names another one.
    assert decide(matcher, {"X-User-No": "1001"}).flag == PROD
    # An explicit argument wins over the header.
    assert decide(matcher, {"X-Uid": "1001"}, user="bob").flag == PROD


def test_cities_ignore_case_and_surrounding_spaces(policy):
    matcher = GrayMatcher(policy(enabled=True, cities=["Local", "本地", "Straße"]))
    for city in ("local", " LOCAL ", "本地", "STRASSE"):
        assert decide(matcher, {"X-City": city}) == Decision(GRAY, "city"), city
    assert decide(matcher, city="local") == Decision(GRAY, "city")
    assert decide(matcher, {"X-City": "locale"}).flag == PROD
    assert decide(matcher, {"X-City": "local"}, city="Paris").flag == PROD


IP_RULES = ["127.0.0.1", "10.1.0.0/16", "192.168.7.128/25", "2001:db8::/32", "fe80::1"]


@pytest.mark.parametrize(
    ("ip", "matches"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", False),
        ("10.1.0.0", True),  # first address of the range
        ("10.1.255.255", True),  # last address of the range
        ("10.0.255.255", False),
        ("10.2.0.0", False),
        ("192.168.7.128", True),
        ("192.168.7.255", True),
        ("192.168.7.127", False),
        ("192.168.8.0", False),
        ("2001:db8::", True),
        ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", True),
        ("2001:DB8:0:0:0:0:0:1", True),
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", False),
        ("2001:db9::", False),
        ("fe80::1", True),
        ("fe80::2", False),
        ("::ffff:10.1.2.3", True),  # IPv4-mapped IPv6 meets the IPv4 rules
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.2.0.0", False),
        ("::1", False),
        ("", False),
        ("abc", False),
        ("10.1.2", False),
        ("10.1.2.3.4", False),
        ("010.1.2.3", False),
        ("10.1.2.3/32", False),
        (" 10.1.2.3", False),
        ("10.1.2.3\x00", False),
        ("fe80::1%eth0", False),
    ],
)
def test_ip_rules(policy, ip, matches):
    matcher = GrayMatcher(policy(enabled=True, ips=IP_RULES))
    expected = Decision(GRAY, "ip") if matches else Decision(PROD, None)
    assert decide(matcher, ip=ip) == expected


def test_ip_that_is_not_a_string_matches_nothing(policy):
    matcher = GrayMatcher(policy(enabled=True, ips=IP_RULES))
    assert decide(matcher, ip=b"127.0.0.1").flag == PROD


def test_ipv4_mapped_rules_meet_plain_ipv4_requests(policy):
    matcher = GrayMatcher({**policy(enabled=True), "ips": ["::ffff:10.9.0.0/112"]})
    assert decide(matcher, ip="10.9.1.2").matched == "ip"
    assert decide(matcher, ip="10.8.1.2").flag == PROD


def test_overlapping_and_adjacent_cidrs(policy):
    rules = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "172.16.255.0/24", "172.17.0.0/24"]
    matcher = GrayMatcher(policy(enabled=True, ips=rules))
    for ip in ("10.0.0.0", "10.1.2.3", "10.200.3.4", "10.255.255.255"):
        assert decide(matcher, ip=ip).matched == "ip", ip
    # Two ranges that touch across a /16 boundary.
    for ip in ("172.16.255.0", "172.16.255.255", "172.17.0.0", "172.17.0.255"):
        assert decide(matcher, ip=ip).matched == "ip", ip
    for ip in ("9.255.255.255", "11.0.0.0", "172.16.254.255", "172.17.1.0"):
        assert decide(matcher, ip=ip).flag == PROD, ip


def test_whole_address_space_including_its_last_address(policy):
    matcher = GrayMatcher(policy(enabled=True, ips=["0.0.0.0/0", "::/0"]))
    for ip in ("0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"):
        assert decide(matcher, ip=ip).matched == "ip", ip


def test_ip_rules_agree_with_ipaddress_on_random_rules():
    rnd = random.Random(7)
    rules = []
    for _ in range(400):
        prefix = rnd.choice((8, 12, 16, 20, 23, 24, 27, 30, 31, 32))
        rules.append(ipaddress.IPv4Network((rnd.getrandbits(32), prefix), strict=False))
    for _ in range(100):
        prefix = rnd.choice((16, 32, 48, 64, 100, 127, 128))
        rules.append(ipaddress.IPv6Network((rnd.getrandbits(128), prefix), strict=False))
    gray = {
        "enabled": True,
        "header": {"name": "", "value": ""},
        "ips": [str(rule) for rule in rules],
        "cities": [],
        "users": [],
        "user_header": "X-User-No",
        "city_header": "X-City",
        "percent": 0,
    }
    matcher = GrayMatcher(gray)  # the gateway document's "gray" section, no versions
    probes = []
    for rule in rules:
        probes += [rule.network_address - 1, rule.network_address]
        probes += [rule.broadcast_address, rule.broadcast_address + 1]
    probes += [ipaddress.IPv4Address(rnd.getrandbits(32)) for _ in range(3000)]
    for address in probes:
        expected = any(address in rule for rule in rules if rule.version == address.version)
        assert (matcher.decide({}, ip=str(address)).flag == GRAY) is expected, address


def test_percent_zero_and_hundred(policy):
    nobody = GrayMatcher(policy(enabled=True, percent=0))
    everybody = GrayMatcher(policy(enabled=True, percent=100))
    for user in ("1", "1001", "alice", "x" * 100):
        assert decide(nobody, user=user).flag == PROD
        assert decide(everybody, user=user) == Decision(GRAY, "percent")
    # 100 % is all traffic, also requests that carry no user id.
    assert decide(everybody) == Decision(GRAY, "percent")


def test_percent_needs_a_user_id_to_be_sticky(policy):
    matcher = GrayMatcher(policy(enabled=True, percent=99))
    assert decide(matcher).flag == PROD
    assert decide(matcher, {"X-User-No": ""}).flag == PROD


def gray_share(matcher, users):
    return sum(matcher.decide({}, user=user).flag == GRAY for user in users) / len(users)


@pytest.mark.parametrize("percent", [10, 50])
@pytest.mark.parametrize(
    "make_user",
    [str, lambda n: f"user-{n}", lambda n: str(13_800_000_000 + n * 7)],
    ids=["sequential", "prefixed", "phone"],
)
def test_percent_spread_over_100k_users(policy, percent, make_user):
    matcher = GrayMatcher(policy(enabled=True, percent=percent))
    share = gray_share(matcher, [make_user(n) for n in range(100_000)])
    assert abs(share - percent / 100) <= 0.02


def test_raising_percent_keeps_users_already_in_gray(policy):
    users = [str(n) for n in range(5_000)]
    at_10 = GrayMatcher(policy(enabled=True, percent=10))
    at_30 = GrayMatcher(policy(enabled=True, percent=30))
    gray_at_10 = {u for u in users if at_10.decide({}, user=u).flag == GRAY}
    gray_at_30 = {u for u in users if at_30.decide({}, user=u).flag == GRAY}
    assert gray_at_10 < gray_at_30


@pytest.mark.slow
def test_percent_is_sticky_across_processes(policy):
    users = [f"u{n}" for n in range(2_000)]
    matcher = GrayMatcher(policy(enabled=True, percent=37))
    here = "".join("G" if matcher.decide({}, user=u).flag == GRAY else "." for u in users)
    assert here == "".join("G" if matcher.decide({}, user=u).flag == GRAY else "." for u in users)
    script = (
        "import copy\n"
        "from routing_engine import DEFAULT_POLICY, GRAY, GrayMatcher, normalize_policy\n"
        "p = normalize_policy({**copy.deepcopy(DEFAULT_POLICY), 'enabled': True, 'percent': 37})\n"
        "m = GrayMatcher(p)\n"
        "print(''.join('G' if m.decide({}, user=f'u{n}').flag == GRAY else '.'"
        " for n in range(2000)))\n"
    )
    for hash_seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)}
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == here


def test_decision_is_immutable():
    decision = Decision(GRAY, "ip")
    with pytest.raises(AttributeError):
        decision.flag = PROD  # type: ignore[misc]


def test_lower_headers():
    assert lower_headers({"X-User-No": "1", "Gray": "x"}) == {"x-user-no": "1", "gray": "x"}


def test_pick_headers_lower_cases_the_named_headers_in_any_spelling_and_only_those(policy):
    matcher = GrayMatcher(policy(enabled=True, header={"name": "X-Canary", "value": "yes"}))
    assert matcher.header_names == {"x-canary", "x-city", "x-user-no"}
    request = {"X-CANARY": "yes", "x-city": "Paris", "User-Agent": "curl", "X-User-No": "7"}
    for _ in range(2):  # the second time from the spellings it remembers
        assert matcher.pick_headers(request) == {"x-canary": "yes", "x-city": "Paris",
                                                 "x-user-no": "7"}  # fmt: skip
    assert matcher.decide(matcher.pick_headers(request)) == Decision(GRAY, "header")
    assert matcher.pick_headers({"x-Canary": "no"}) == {"x-canary": "no"}


def test_pick_headers_forgets_spellings_rather_than_grow_without_bound(policy):
    matcher = GrayMatcher(policy(enabled=True))
    for n in range(10_000):
        matcher.pick_headers({f"X-Noise-{n}": "1", "x-user-no": "1001"})
    # The dicts the picker keeps: the C one's, or those in its closure and in that of the
    # functions there.
    functions, dicts = [matcher.pick_headers], []
    if hasattr(matcher.pick_headers, "spellings"):
        functions, dicts = [], [matcher.pick_headers.spellings]
    while functions:
        for cell in functions.pop().__closure__ or ():
            if isinstance(cell.cell_contents, dict):
                dicts.append(cell.cell_contents)
            elif callable(cell.cell_contents) and hasattr(cell.cell_contents, "__closure__"):
                functions.append(cell.cell_contents)
    assert dicts
    assert all(len(kept) <= 4096 for kept in dicts)


def test_pick_headers_picks_as_lower_headers_in_every_spelling_and_order(policy):
    """Known spellings are looked up directly; a new one, or two spellings of one name in a
    request (the later wins), take the step per header: the same headers either way."""
    matcher = GrayMatcher(policy(enabled=True, header={"name": "X-Canary", "value": "yes"}))
    rnd = random.Random(23)
    spellings = ["X-Canary", "x-canary", "X-CANARY", "X-City", "x-city", "X-User-No",
                 "x-user-no", "User-Agent", "Accept", "X-Request-Id"]  # fmt: skip
    for n in range(3000):
        names = rnd.sample(spellings, rnd.randint(0, 6))
        if n % 50 == 0:  # now and then a spelling never seen
            names.append("".join(rnd.choice((c.lower(), c.upper())) for c in "x-user-no"))
        request = {name: f"{name}-{n}" for name in names}
        expected = {
            name: value
            for name, value in lower_headers(request).items()
            if name in matcher.header_names
        }
        assert matcher.pick_headers(request) == expected, request
