"""Which headers cross the gateway."""

from dataplane.gateway.headers import connection_listed, is_hop_by_hop, strip_gray_baggage


def test_hop_by_hop_headers_per_rfc_9110():
    listed = connection_listed([(b"connection", b"close, X-Hop"), (b"x-other", b"1")])
    assert listed == {b"close", b"x-hop"}
    for name in (b"connection", b"keep-alive", b"te", b"trailer", b"transfer-encoding",
                 b"upgrade", b"proxy-authorization", b"proxy-anything", b"x-hop"):  # fmt: skip
        assert is_hop_by_hop(name, listed), name
    for name in (b"content-length", b"host", b"x-gray-status", b"baggage", b"x-other"):
        assert not is_hop_by_hop(name, listed), name


def test_gray_members_of_baggage_are_dropped_and_the_rest_kept():
    value = b"userId=alice, x-gray-status=GRAY;p=1,Gray=1 ,serverNode=DF%2028"
    assert strip_gray_baggage(value) == b"userId=alice,serverNode=DF%2028"
    assert strip_gray_baggage(b"x-gray-status=GRAY") == b""
