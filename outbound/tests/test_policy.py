"""The outbound address policy: which addresses it refuses and why, at save (a URL) and at
connect (the client: a refused address is never connected to, an allowed one is reached
with its host name kept for the Host header and for TLS)."""

import datetime
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from outbound import DEFAULT_POLICY, AddressRefused, Policy
from testing.fakes.nacos_fake import FakeNacos

LIST = "/v1/ns/service/list?pageNo=1&pageSize=10"
REFUSED_BY_DEFAULT = {
    "http://169.254.169.254/latest/meta-data/": "169.254.169.254 is a cloud metadata address",
    "http://169.254.170.2/v2/credentials": "169.254.170.2 is a cloud metadata address",
    "http://[fd00:ec2::254]/latest/": "fd00:ec2::254 is a cloud metadata address",
    "http://100.100.100.200/latest/": "100.100.100.200 is a cloud metadata address",
    "http://[::ffff:169.254.169.254]:80/": "169.254.169.254 is a cloud metadata address",
    "http://169.254.10.20:8848/nacos": "169.254.10.20 is a link-local address",
    "http://[fe80::1]:8848/nacos": "fe80::1 is a link-local address",
    "http://[fe80::1%25eth0]:8848/nacos": "fe80::1%eth0 is a link-local address",
    "http://0.0.0.0:8848/nacos": "0.0.0.0 is an unspecified address (it reaches this host)",
    "http://[::]:8848/nacos": ":: is an unspecified address (it reaches this host)",
    # Resolved, not parsed: the resolver reads this decimal form as 169.254.169.254.
    "http://2852039166/": "2852039166 resolves to 169.254.169.254, which is a cloud metadata",
}
ALLOWED_BY_DEFAULT = [
    "http://127.0.0.1:8848/nacos",
    "http://[::1]:8848/nacos",
    "http://localhost:8761/eureka",
    "http://10.0.0.5:8848/nacos",
    "http://172.16.3.4:8848/nacos",
    "http://192.168.1.10:8761/eureka",
    "https://hooks.slack.example/services/T0/B0",  # does not resolve here: checked at connect
]


@pytest.mark.parametrize("url", REFUSED_BY_DEFAULT)
def test_link_local_metadata_and_unspecified_addresses_are_refused_with_the_reason(url):
    reason = DEFAULT_POLICY.url_refusal(url)
    assert reason is not None and reason.startswith(REFUSED_BY_DEFAULT[url])
    assert reason.endswith("refused (OUTBOUND_DENIED_NETWORKS)")


@pytest.mark.parametrize("url", ALLOWED_BY_DEFAULT)
def test_private_and_loopback_addresses_are_allowed(url):
    assert DEFAULT_POLICY.url_refusal(url) is None


def test_the_networks_are_the_operators_to_set():
    only_internal = Policy(allowed=["10.0.0.0/8"], denied=[])
    assert only_internal.url_refusal("http://10.1.2.3/") is None
    assert only_internal.url_refusal("http://127.0.0.1/") == (
        "127.0.0.1 is not in OUTBOUND_ALLOWED_NETWORKS: refused"
    )
    assert only_internal.url_refusal("http://localhost/") == (
        "localhost resolves to 127.0.0.1, which is not in OUTBOUND_ALLOWED_NETWORKS: refused"
    )
    # Denying nothing allows the metadata address; denying more refuses more.
    assert Policy(denied=[]).url_refusal("http://169.254.169.254/") is None
    no_loopback = Policy(denied=["127.0.0.0/8", "::1"])
    assert no_loopback.url_refusal("http://127.0.0.1/") == (
        "127.0.0.1 is in a denied network: refused (OUTBOUND_DENIED_NETWORKS)"
    )
    with pytest.raises(ValueError, match="not an IP address or CIDR: '10.0.0.0/33'"):
        Policy(denied=["10.0.0.0/33"])


def test_a_refused_address_is_never_connected_to():
    with FakeNacos() as nacos:
        assert httpx.get(nacos.url + LIST).status_code == 200
        accepted = nacos._server.accepted
        with Policy(denied=["127.0.0.0/8"]).client(timeout=2) as client:
            started = time.monotonic()
            with pytest.raises(AddressRefused, match="127.0.0.1 is in a denied network"):
                client.get(nacos.url + LIST)
            with pytest.raises(httpx.ConnectError, match="localhost resolves to 127.0.0.1"):
                client.get(f"http://localhost:{nacos.port}/nacos{LIST}")
        assert time.monotonic() - started < 1
        assert nacos._server.accepted == accepted


def test_an_allowed_name_is_reached_by_its_checked_address_with_its_host_header():
    with FakeNacos() as nacos, DEFAULT_POLICY.client(timeout=2) as client:
        response = client.get(f"http://localhost:{nacos.port}/nacos{LIST}")
        assert response.status_code == 200
        assert str(response.request.url).startswith(f"http://localhost:{nacos.port}/")
        assert nacos.headers_log[-1]["host"] == f"localhost:{nacos.port}"


def test_the_metadata_address_fails_fast_without_a_timeout():
    with DEFAULT_POLICY.client(timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(AddressRefused, match="cloud metadata address"):
            client.get("http://169.254.169.254/latest/meta-data/iam/security-credentials/")
        assert time.monotonic() - started < 1


def test_a_name_that_does_not_resolve_is_a_connect_error():
    with DEFAULT_POLICY.client(timeout=2) as client, pytest.raises(httpx.ConnectError) as error:
        client.get("http://registry.graylane.invalid:8848/nacos")
    assert "registry.graylane.invalid" in str(error.value)
    assert not isinstance(error.value, AddressRefused)


# TLS: the connection goes to the checked address, the certificate is verified for the name.


def certificate(tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for `localhost` only (no IP address in it) and a
    client context that trusts that certificate alone."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = f"hello {self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_tls_is_verified_for_the_host_name_not_the_address(tmp_path):
    server_context, client_context = certificate(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    server.socket = server_context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        with DEFAULT_POLICY.client(timeout=5, verify=client_context) as client:
            answer = client.get(f"https://localhost:{port}/")
            assert (answer.status_code, answer.text) == (200, f"hello localhost:{port}")
            # The certificate names localhost, not 127.0.0.1: verified against the name.
            with pytest.raises(httpx.ConnectError, match="certificate"):
                client.get(f"https://127.0.0.1:{port}/")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
