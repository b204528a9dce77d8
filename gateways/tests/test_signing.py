import pytest

from gateways import signing

BODY = b'{"generation": 3}'


def test_a_signature_verifies_with_the_same_secret_and_body():
    header = signing.sign("s3cret", BODY, timestamp=1_700_000_000)
    assert header.startswith("t=1700000000,v1=")
    assert signing.verify("s3cret", header, BODY, now=1_700_000_010) == 1_700_000_000


@pytest.mark.parametrize(
    "secret,body,now,reason",
    [
        ("other", BODY, 1_700_000_000, "does not match"),
        ("s3cret", b'{"generation": 4}', 1_700_000_000, "does not match"),
        ("s3cret", BODY, 1_700_000_301, "tolerance"),
        ("s3cret", BODY, 1_699_999_699, "tolerance"),
    ],
)
def test_wrong_secret_tampered_body_and_replays_are_refused(secret, body, now, reason):
    header = signing.sign("s3cret", BODY, timestamp=1_700_000_000)
    with pytest.raises(signing.InvalidSignature, match=reason):
        signing.verify(secret, header, body, now=now)


@pytest.mark.parametrize("header", ["", "v1=abc", "t=123", "t=abc,v1=def", "garbage"])
def test_malformed_headers_are_refused(header):
    with pytest.raises(signing.InvalidSignature, match="Malformed"):
        signing.verify("s3cret", header, BODY, now=123)


def test_any_of_several_signatures_may_match_while_a_secret_is_rotated():
    new = signing.sign("new", BODY, timestamp=100).split(",v1=")[1]
    old_header = signing.sign("old", BODY, timestamp=100)
    assert signing.verify("new", f"{old_header},v1={new}", BODY, now=100) == 100
