"""The differential test's own parts, without a server (tests/test_differential.py runs
them for real): the generator's callers are the ones the gateways' rule finds, answers are
read hop by hop, and every field that differs is reported at its hop."""

from collections import Counter

import pytest

from routing_engine import DEFAULT_POLICY, CallerResolver, GrayMatcher, matcher, normalize_policy
from routing_engine.lanes import normalize_lane
from testing import differential as diff
from testing.speedups import compiled_or_skip

V1 = diff.Hop("user-app", "PROD", None, "V1", (("graylane.gray", "PROD"),), ("PROD", None))


def test_the_generator_is_repeatable_and_its_callers_are_the_gateways():
    requests = diff.generate(3000)
    assert requests == diff.generate(3000)
    resolver = CallerResolver(diff.TRUSTED_PROXIES)
    for request in requests:
        forwarded = next(
            (value for name, value in request.headers if name.lower() == "x-forwarded-for"), None
        )
        assert resolver.client_ip(request.peer, forwarded) == request.client, request
        assert request.believed == resolver.is_trusted(request.peer)


def test_an_answer_is_read_hop_by_hop():
    leaf = {
        "version": "V3",
        "headers": {"x-gray-status": "GRAY", "x-gray-lane": "feature-x",
                    "baggage": "tenant=acme,graylane.gray=GRAY,graylane.lane=feature-x"},
    }  # fmt: skip
    received = {"x-gray-status": "GRAY", "x-gray-lane": "feature-x",
                "baggage": "graylane.gray=GRAY,graylane.lane=feature-x"}  # fmt: skip
    order = {"service": "order-app", "version": "V1", "flag": "GRAY", "lane": "feature-x",
             "received": received, "downstream": leaf}  # fmt: skip
    user = {**order, "service": "user-app", "version": "V3", "downstream": order}
    lane = (("graylane.gray", "GRAY"), ("graylane.lane", "feature-x"))
    assert diff.observe(user) == [
        diff.Hop("user-app", "GRAY", "feature-x", "V3", lane, ("GRAY", "feature-x")),
        diff.Hop("order-app", "GRAY", "feature-x", "V1", lane, ("GRAY", "feature-x")),
        diff.Hop("pay-app", "GRAY", "feature-x", "V3", lane),
    ]
    # A version-less instance is an echo server: the path ends there.
    version_less = {"version": diff.NO_VERSION, "headers": {"x-gray-status": "PROD"}}
    assert [hop.version for hop in diff.observe(version_less)] == [diff.NO_VERSION]
    assert diff.observe({"error": "HTTP 503"})[0].version == "error: HTTP 503"


def test_every_differing_field_is_reported_at_its_hop_with_an_example():
    requests = diff.generate(2)
    wanted = [[V1, V1], [V1, V1]]
    gray = diff.Hop("user-app", "GRAY", "gray", "V2", V1.baggage, ("GRAY", "gray"))
    observed = diff.Observed([[V1, V1], [V1, gray]], resent=[(1, "HTTP 500")])
    report = diff.compare("test", requests, wanted, observed)
    assert (report.requests, report.hops, report.disagreements) == (2, 4, 1)
    assert report.disagreeing == [1]
    assert dict(report.by_hop_and_field) == {
        ("2:order-app", "flag"): 1,
        ("2:order-app", "lane"): 1,
        ("2:order-app", "version"): 1,
        ("2:order-app", "sdk"): 1,
    }
    assert report.examples[0]["got"]["version"] == "V2"
    assert "1 requests sent again after an error" in report.summary()
    # A hop missing from the answer disagrees too.
    short = diff.compare("test", requests[:1], wanted[:1], diff.Observed([[V1]], []))
    assert dict(short.by_hop_and_field) == {("2:order-app", "missing"): 1}


def _matchers(compiled, document_lanes):
    """GrayMatcher of the differential document's rules (and its lanes, if given), built on the
    engine's C primitives or on its pure Python fallback, with each path service's decide."""
    previous = matcher.speedups
    matcher.speedups = compiled_or_skip() if compiled else None
    try:
        lanes = {
            entry["name"]: normalize_lane({k: v for k, v in entry.items() if k != "name"})
            for entry in document_lanes
        }
        rules = {key: value for key, value in diff.GRAY_RULES.items() if key != "routing"}
        built = GrayMatcher(normalize_policy({**DEFAULT_POLICY, **rules}), {}, lanes)
    finally:
        matcher.speedups = previous
    return built, [built.decide] + [built.for_service(service) for service in diff.PATH]


@pytest.mark.parametrize("document_lanes", [diff.LANES, []], ids=["lanes", "gray-only"])
def test_the_compiled_engine_decides_as_the_pure_python_one(document_lanes):
    """Every generated request, as a gateway decides it (its client, the city it believes or
    GeoIP's) and with the city left to the header, at every hop of the path: the C primitives
    (routing_engine/_speedups.c) and the pure Python ones decide the same."""
    compiled, compiled_decides = _matchers(True, document_lanes)
    pure, pure_decides = _matchers(False, document_lanes)
    resolver = CallerResolver(diff.TRUSTED_PROXIES, str(diff.GEOIP_TEST_DB))
    decided: Counter[tuple[str | None, str | None]] = Counter()
    for request in diff.generate(10_000):
        headers = {name: diff.read_as_gateways_do(value) for name, value in request.headers}
        picked = compiled.pick_headers(headers)
        assert picked == pure.pick_headers(headers), request
        city = resolver.city(request.client, picked.get("x-city"), request.believed)
        for ours, theirs in zip(compiled_decides, pure_decides, strict=True):
            for kwargs in ({"city": city or ""}, {}):
                decision = ours(picked, request.client, **kwargs)
                assert decision == theirs(picked, request.client, **kwargs), request
                decided[decision.lane, decision.matched] += 1
    # The requests reach every rule kind of every lane (the comparison means something).
    lanes = {entry["name"] for entry in document_lanes} | {"gray"}
    kinds = {(lane, kind) for lane, kind in decided if lane is not None}
    assert {lane for lane, _ in kinds} == lanes
    assert {kind for _, kind in kinds} == {"header", "ip", "city", "user", "percent"}
