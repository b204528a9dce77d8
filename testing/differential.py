"""The differential test's world (tests/test_differential.py, issue 23): one document, many
generated requests, and every engine's answer at every hop compared with the simulator's.

* **The document.** The gray lane and three other lanes, each with header, CIDR (IPv4 and
  IPv6), city, user and fractional-percent rules, before and after the gray lane; members
  on the 3-service path user-app -> order-app -> pay-app, one of them (order-app V4 in
  feature-x) with no instance, so that hop falls back to prod; an instance without a
  version (user-app's and pay-app's: never reached under PROD or GRAY) and a quarantined
  version (order-app V2: registered, and never reached).
* **The requests** (`generate`): seeded, so a run can be repeated. Lane and gray headers
  (right and wrong values), users (listed, in and out of the percents, in other cases),
  clients behind the trusted proxy (X-Forwarded-For, IPv4 and IPv6, with a trusted hop
  after the client or not, cities from the GeoIP2 test database or from the city header)
  and clients that are no trusted proxy (their X-Forwarded-For and city header are their
  word: not believed), and route headers forged by the client (dropped).
* **Expected** (`expected`): the dashboard's simulator (`policy.simulation.simulate`, the
  simulate API's code) with `path`, for the client and city the request's sender stands
  for: the flag, the lane and the version at each hop.
* **Observed** (`drive`, `observe`): the request sent for real through a gateway (the
  Python gateway, or Envoy or nginx under the agent) to user-app, whose instances, and
  order-app's, are processes on the service SDK (dataplane/sdk/tests/hop_app.py: its
  middleware reads the route, its balancer picks the next hop's instance from the
  registry); pay-app's instances are the gateway lab's echo servers. So the first hop is
  the engine's decision and the later ones the SDK balancer's, from the headers the engine
  sent on.
* **Compared** (`compare`): at each hop the flag and lane sent on (`X-Gray-Status`,
  `X-Gray-Lane`), the graylane members of `baggage`, the SDK's reading of them (at the
  SDK's hops), and the version that answered. Every difference is a disagreement; the
  report counts them per hop and field and keeps examples (request, expected, got).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from policy.models import PolicyState
from policy.publishing import load_state
from policy.simulation import simulate
from registry_sync.models import Instance

PATH = ("user-app", "order-app", "pay-app")
GEOIP_TEST_DB = Path(__file__).resolve().parents[1] / "tests/data/geoip/GeoIP2-City-Test.mmdb"

# The gateway's trusted proxies: the loopback peer the generator sends from, and a private
# network a request may have passed through after its client.
TRUSTED_PROXIES = "127.0.0.1/32,10.0.0.0/8"
TRUSTED_PEER = "127.0.0.1"
UNTRUSTED_PEER = "127.0.0.2"  # loopback too, so it reaches the gateway; no trusted proxy
USER_HEADER, CITY_HEADER = "X-User-No", "X-City"

GRAY_RULES: dict[str, Any] = {
    "enabled": True,
    "routing": True,
    "header": {"name": "gray", "value": "gray-996"},
    "ips": ["203.0.113.0/24", "2001:db8:abcd::/48"],
    "cities": ["London"],
    "users": ["1001", "1002"],
    "user_header": USER_HEADER,
    "city_header": CITY_HEADER,
    "percent": 12.5,
}


def lane(
    name: str, priority: int, match: Mapping[str, Any], members: Mapping[str, Any]
) -> dict[str, Any]:
    """A lane as `POST /api/v1/lanes/` takes it, matched by `x-lane: <name>` and `match`."""
    rules = {"header": {"name": "x-lane", "value": name}, "ips": [], "cities": [], "users": []}
    return {
        "name": name,
        "priority": priority,
        "match": {**rules, "percent": 0, **match},
        "members": {
            service: {"percent": 0, "targeted": True, **member}
            for service, member in members.items()
        },
    }


LANES = [
    # Before the gray lane. order-app V4 has no instance: that hop falls back to prod.
    lane(
        "feature-x",
        100,
        {"ips": ["198.51.100.0/25", "2001:db8:1::/64"], "cities": ["Boxford"],
         "users": ["2001", "u-Alice"], "percent": 2.75},
        {"user-app": {"version": "V3", "percent": 3.5}, "order-app": {"version": "V4"},
         "pay-app": {"version": "V3"}},
    ),
    # Not a member at user-app (prod there), its own version further on.
    lane(
        "feature-y",
        200,
        {"ips": ["175.16.199.0/24"], "cities": ["Linköping"], "users": ["3001"],
         "percent": 0.5},
        {"order-app": {"version": "V3"}, "pay-app": {"version": "V3"}},
    ),
    # After the gray lane (1000): only what the gray lane leaves. `本地` (the reference
    # design's name for local callers) takes the private and loopback callers left.
    lane(
        "feature-z",
        1500,
        {"ips": ["216.160.83.56/29"], "cities": ["San Diego", "本地"], "users": ["4001", "jürgen"],
         "percent": 5.01},
        {"user-app": {"version": "V4", "percent": 1.25}, "pay-app": {"version": "V4"}},
    ),
]  # fmt: skip

# The instances: user-app's and order-app's on the SDK (they call the next service),
# pay-app's the lab's echo servers. NO_VERSION: an instance registered without a version.
NO_VERSION = "no-version"
SDK_INSTANCES = {"user-app": ("V1", "V2", "V3", "V4"), "order-app": ("V1", "V2", "V3")}
LEAF_INSTANCES = {"pay-app": ("V1", "V2", "V3", "V4", NO_VERSION), "user-app": (NO_VERSION,)}
QUARANTINED = ("order-app", "V2")

# Callers' addresses: (address, what the GeoIP2 test database or the local ranges say).
CLIENTS = [
    "81.2.69.142",  # London (the gray lane's city)
    "81.2.69.160",  # London
    "2.125.160.216",  # Boxford (feature-x's)
    "89.160.20.112",  # Linköping (feature-y's)
    "216.160.83.56",  # Milton, in feature-z's CIDR
    "216.160.83.64",  # out of it
    "2001:480:10::1",  # San Diego (feature-z's city), IPv6
    "214.78.120.5",  # San Diego, IPv4
    "175.16.199.7",  # Changchun, feature-y's CIDR
    "203.0.113.9",  # the gray lane's CIDR
    "2001:db8:abcd::42",  # the gray lane's IPv6 CIDR
    "198.51.100.3",  # feature-x's CIDR
    "198.51.100.200",  # just out of it
    "2001:db8:1::9",  # feature-x's IPv6 CIDR
    "2001:db8:2::9",  # out of it
    "::ffff:203.0.113.77",  # IPv4-mapped IPv6: the IPv4 address
    "192.0.2.10",  # no city
    "10.1.2.3",  # a private address (and a trusted proxy): local, feature-z's 本地
    "192.168.7.7",  # private: local, feature-z's 本地
]
# Non-ASCII values go out as UTF-8 (what the client sends): the gateways read header bytes
# as ISO-8859-1, so the simulator is given them so read (`read_as_gateways_do`).
CITY_HEADERS = ["London", "LONDON", "Boxford", "boxford", "Paris", "San Diego", "Linköping", "本地"]
LISTED_USERS = ["1001", "1002", "2001", "u-Alice", "u-alice", "U-ALICE", "3001", "4001", "jürgen"]
FORGED_ROUTE = {
    "X-Gray-Status": "GRAY",
    "X-Gray-Lane": "feature-x",
    "X-Gray-Versions": "*=V3/V1,user-app=V3,order-app=V2",
    "baggage": "graylane.gray=GRAY,graylane.lane=feature-x,tenant=acme",
}


@dataclass(frozen=True)
class Request:
    """One generated request: sent from `peer` with `headers`; `client` is the caller the
    gateway should find, and `believed` whether its city header counts."""

    index: int
    peer: str
    headers: tuple[tuple[str, str], ...]
    client: str
    believed: bool

    def sends(self, name: str, value: str) -> bool:
        return any(n.lower() == name.lower() and v == value for n, v in self.headers)

    def describe(self) -> dict[str, Any]:
        return {"peer": self.peer, "headers": dict(self.headers), "client": self.client}


def generate(count: int, seed: int = 23) -> list[Request]:
    """`count` requests of every kind the document's rules tell apart."""
    rng = random.Random(seed)
    requests = []
    for index in range(count):
        headers: dict[str, str] = {}
        roll = rng.random()
        if roll < 0.15:
            headers["x-lane"] = rng.choice(["feature-x", "feature-y", "feature-z", "feature-w"])
        elif roll < 0.22:
            headers["gray"] = "gray-996"
        elif roll < 0.25:
            headers["gray"] = rng.choice(["gray-997", "GRAY-996", "gray-9960"])
        roll = rng.random()
        if roll < 0.12:
            headers[USER_HEADER] = rng.choice(LISTED_USERS)
        elif roll < 0.75:
            headers[USER_HEADER] = rng.choice(["u", "u", "u", "u", "ü", "用户"]) + str(
                rng.randrange(100_000)
            )
        if rng.random() < 0.05:
            headers.update(FORGED_ROUTE)
        if rng.random() < 0.7:  # through the trusted proxy
            peer, believed = TRUSTED_PEER, True
            client = TRUSTED_PEER
            if rng.random() < 0.9:
                hops = [rng.choice(CLIENTS)]
                if rng.random() < 0.3:  # another trusted proxy after the client
                    hops.append(f"10.9.{rng.randrange(256)}.{rng.randrange(1, 255)}")
                if rng.random() < 0.1:  # the client's own word before it: ignored
                    hops.insert(0, rng.choice(["81.2.69.142", "unknown"]))
                if rng.random() < 0.03:  # a garbled chain says nothing: the peer is the client
                    hops.append("unknown")
                headers["X-Forwarded-For"] = ", ".join(hops)
                client = _client(hops, peer)
        else:  # straight from a client: what it says of itself is not believed
            peer, believed, client = UNTRUSTED_PEER, False, UNTRUSTED_PEER
            if rng.random() < 0.5:
                headers["X-Forwarded-For"] = rng.choice(CLIENTS)
        if rng.random() < 0.25:
            headers[CITY_HEADER] = rng.choice(CITY_HEADERS)
        spelled = tuple((_spelling(rng, name), value) for name, value in headers.items())
        requests.append(Request(index, peer, spelled, client, believed))
    return requests


def read_as_gateways_do(value: str) -> str:
    """A header value as the gateways read it: its bytes (UTF-8, as sent) as ISO-8859-1."""
    return value.encode().decode("latin-1")


def _spelling(rng: random.Random, name: str) -> str:
    """Header names are case-insensitive: one in five is sent in another case."""
    if rng.random() >= 0.2:
        return name
    return rng.choice([name.lower(), name.upper(), name.title()])


def _client(forwarded_for: Sequence[str], peer: str) -> str:
    """The client of a request from a trusted proxy (`peer`): the nearest address in its
    X-Forwarded-For that is no trusted proxy (the ones left of it are the client's word),
    else the farthest; the peer when an entry up to that one is no address (a garbled chain
    says nothing reliable)."""
    trusted = [ipaddress.ip_network(cidr) for cidr in TRUSTED_PROXIES.split(",")]
    for hop in reversed(forwarded_for):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            return peer
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not any(address in network for network in trusted):
            return hop
    return forwarded_for[0]


@dataclass(frozen=True)
class Hop:
    """What a hop got: the route it received, as sent on (`flag`, `lane`), the graylane
    members of its `baggage`, the SDK's reading of the route (its hops only), and the
    version that answered."""

    service: str
    flag: str | None
    lane: str | None
    version: str | None
    baggage: tuple[tuple[str, str], ...] = ()
    sdk: tuple[str | None, str | None] | None = None


def baggage_members(flag: str | None, lane: str | None) -> tuple[tuple[str, str], ...]:
    members = [("graylane.gray", flag)] if flag else []
    if flag == "GRAY" and lane:
        members.append(("graylane.lane", lane))
    return tuple((key, value) for key, value in members if value)


def _graylane_baggage(value: str | None) -> tuple[tuple[str, str], ...]:
    members = []
    for member in (value or "").split(","):
        key, _, rest = member.partition("=")
        if key.strip().startswith("graylane."):
            members.append((key.strip(), rest.split(";")[0].strip()))
    return tuple(sorted(members))


Expected = tuple[list[list[Hop]], Counter]
# The simulator's answers by what they depend on: the requests, the document and the
# instances' versions and states (not their addresses, which each test's fleet has anew).
_answered: dict[tuple[tuple[Request, ...], str], Expected] = {}


def expected(requests: Sequence[Request]) -> Expected:
    """The simulator's answer for each request at each hop of PATH, and how many requests
    each (lane, rule kind) decided. The simulator takes a request as one from a trusted
    proxy (its `ip` the client's, its city header believed), so a request that came from
    no trusted proxy is given without its city header. Asked again with the same requests
    and the same document and instances (another engine's test), it answers as before."""
    state = load_state()
    key = (tuple(requests), _fingerprint(state.document))
    if key not in _answered:
        _answered.clear()
        _answered[key] = _simulate(state, requests)
    return _answered[key]


def _fingerprint(document: Mapping[str, Any]) -> str:
    services = {
        name: {key: value for key, value in entry.items() if key != "instances"}
        for name, entry in document["services"].items()
    }
    instances = sorted(
        (service, str(version), state)
        for service, version, state in Instance.objects.values_list(
            "service__name", "version", "state"
        )
    )
    lanes = {  # when each lane was last changed (each test makes them anew) decides nothing
        name: {key: value for key, value in lane.items() if key != "updated_at"}
        for name, lane in document.get("lanes", {}).items()
    }
    routing = {**document, "services": services, "lanes": lanes}
    return json.dumps([routing, instances], sort_keys=True)


def _simulate(state: PolicyState, requests: Sequence[Request]) -> Expected:
    answers = []
    matched: Counter = Counter()
    for request in requests:
        headers = {
            name: read_as_gateways_do(value)
            for name, value in request.headers
            if request.believed or name.lower() != CITY_HEADER.lower()
        }
        result = simulate(
            state, service=None, headers=headers, ip=request.client, city=None, user=None,
            path=list(PATH),
        )  # fmt: skip
        flag, lane = result["flag"], result["lane"]
        matched[(lane or flag, result["matched"])] += 1
        answers.append([_expected_hop(hop, flag, lane) for hop in result["hops"]])
    return answers, matched


def _expected_hop(hop: Mapping[str, Any], flag: str, lane: str | None) -> Hop:
    sdk = (flag, lane) if hop["service"] in SDK_INSTANCES else None
    return Hop(hop["service"], flag, lane, hop["version"], baggage_members(flag, lane), sdk)


def observe(answer: Mapping[str, Any]) -> list[Hop]:
    """The hops of one answer of user-app's /hop: the SDK's instances answer with what they
    received and their downstream's answer; an echo server (pay-app's, or a version-less
    instance) with the headers it received."""
    hops = []
    node: Any = answer
    for service in PATH:
        if not isinstance(node, Mapping) or not node:
            hops.append(Hop(service, None, None, f"no answer: {node!r}"[:200]))
            break
        if "error" in node:
            hops.append(Hop(service, None, None, f"error: {node['error']}"[:200]))
            break
        if "received" in node:  # an instance on the SDK
            received = node["received"]
            hops.append(
                Hop(service, received.get("x-gray-status"), received.get("x-gray-lane"),
                    node["version"], _graylane_baggage(received.get("baggage")),
                    (node["flag"], node["lane"]))
            )  # fmt: skip
            node = node.get("downstream")
            continue
        received = node.get("headers", {})  # an echo server: the end of the path
        hops.append(
            Hop(service, received.get("x-gray-status"), received.get("x-gray-lane"),
                node.get("version"), _graylane_baggage(received.get("baggage")))
        )  # fmt: skip
        break
    return hops


async def _send(
    sessions: Mapping[str, aiohttp.ClientSession],
    url: str,
    request: Request,
    limit: asyncio.Semaphore,
) -> Any:
    async with limit:
        try:
            async with sessions[request.peer].get(
                url + f"/{PATH[0]}/hop", headers=request.headers
            ) as response:
                body = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
    if response.status != 200:
        return {"error": f"HTTP {response.status}: {body[:200]!r}"}
    return json.loads(body)


async def _drive(url: str, requests: Sequence[Request], concurrency: int) -> list[Any]:
    sessions = {
        peer: aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency, local_addr=(peer, 0)),
            timeout=aiohttp.ClientTimeout(total=30),
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )
        for peer in (TRUSTED_PEER, UNTRUSTED_PEER)
    }
    try:
        limit = asyncio.Semaphore(concurrency)
        return await asyncio.gather(*(_send(sessions, url, r, limit) for r in requests))
    finally:
        for session in sessions.values():
            await session.close()


@dataclass
class Observed:
    """What came back: the hops of each request's answer, in the requests' order, and the
    requests sent a second time because the first answer was no answer of the path (a
    transport error, a timeout, an error status), with that first answer."""

    hops: list[list[Hop]]
    resent: list[tuple[int, str]]


def drive(url: str, requests: Sequence[Request], concurrency: int = 16) -> Observed:
    """Every request sent to the gateway at `url` (aiohttp, kept-alive connections, a pool
    per sending address); one whose answer was an error is sent once more, on its own, and
    its second answer counts (whatever it is: a wrong route answers the same twice)."""
    answers = asyncio.run(_drive(url, requests, concurrency))
    failed = [i for i, answer in enumerate(answers) if "error" in answer]
    resent = [(requests[i].index, str(answers[i]["error"])) for i in failed]
    if failed:
        again = asyncio.run(_drive(url, [requests[i] for i in failed], 1))
        for i, answer in zip(failed, again, strict=True):
            answers[i] = answer
    return Observed([observe(answer) for answer in answers], resent)


FIELDS = ("flag", "lane", "version", "baggage", "sdk")


@dataclass
class Report:
    """One engine's comparison with the simulator."""

    engine: str
    requests: int = 0
    hops: int = 0
    disagreements: int = 0  # hops that differ in some field
    disagreeing: list[int] = field(default_factory=list)  # the requests' indexes
    resent: list[tuple[int, str]] = field(default_factory=list)  # Observed.resent
    by_hop_and_field: Counter = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"{self.engine}: {self.requests} requests, {self.hops} hops compared, "
            f"{self.disagreements} disagreeing hops in {len(self.disagreeing)} requests, "
            f"{len(self.resent)} requests sent again after an error"
        ]
        lines += [f"  sent again: request {index}: {error}" for index, error in self.resent[:5]]
        lines += [
            f"  {hop} {name}: {count}"
            for (hop, name), count in sorted(self.by_hop_and_field.items())
        ]
        for example in self.examples:
            lines.append("  " + json.dumps(example, ensure_ascii=False, default=str))
        return "\n".join(lines)


def compare(
    engine: str,
    requests: Sequence[Request],
    wanted: Sequence[Sequence[Hop]],
    observed: Observed,
    examples: int = 20,
) -> Report:
    """Every hop of every request, field by field; a hop missing on one side disagrees."""
    report = Report(engine, requests=len(requests), resent=observed.resent)
    got = observed.hops
    for request, want, have in zip(requests, wanted, got, strict=True):
        differing = False
        for position in range(max(len(want), len(have))):
            expect = want[position] if position < len(want) else None
            actual = have[position] if position < len(have) else None
            report.hops += 1
            names = _differences(expect, actual)
            if not names:
                continue
            differing = True
            report.disagreements += 1
            service = PATH[position] if position < len(PATH) else "?"
            for name in names:
                report.by_hop_and_field[(f"{position + 1}:{service}", name)] += 1
            if len(report.examples) < examples:
                report.examples.append(
                    {"request": request.describe(), "hop": f"{position + 1}:{service}",
                     "fields": names, "expected": _plain(expect), "got": _plain(actual)}
                )  # fmt: skip
        if differing:
            report.disagreeing.append(request.index)
    return report


def _plain(hop: Hop | None) -> dict[str, Any] | None:
    return None if hop is None else dataclasses.asdict(hop)


def _differences(expect: Hop | None, actual: Hop | None) -> list[str]:
    if expect is None or actual is None:
        return ["missing"]
    return [
        name
        for name in FIELDS
        if not (name == "sdk" and expect.sdk is None)
        and getattr(expect, name) != getattr(actual, name)
    ]


def coverage(requests: Sequence[Request], wanted: Sequence[Sequence[Hop]]) -> Counter:
    """What the generated requests exercise, by the simulator's answers: each lane at the
    first hop, fallbacks, and the kinds of callers (for the test to check the generator)."""
    seen: Counter = Counter()
    for request, hops in zip(requests, wanted, strict=True):
        seen[("lane", hops[0].lane or hops[0].flag)] += 1
        seen[("peer", "trusted" if request.believed else "untrusted")] += 1
        seen[("client", "ipv6" if ":" in request.client else "ipv4")] += 1
        for hop in hops:
            seen[("version", hop.service, hop.version)] += 1
    return seen


Mutation = Callable[[dict[str, Any]], None]


def flip_lane_header(name: str) -> Mutation:
    """A document change for the test that shows the comparison can fail: lane `name`'s
    header rule matches another value than the simulator's."""

    def mutate(document: dict[str, Any]) -> None:
        for one in document["lanes"]:
            if one["name"] == name:
                one["match"]["header"]["value"] += "-flipped"

    return mutate
