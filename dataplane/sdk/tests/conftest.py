import pytest

from testing.lossless_lab import lossless_lab


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A dashboard and the gateway in front of it (testing/lossless_lab.py), for the tests that
    go through the real gateway; instances are started by each test."""
    with lossless_lab(tmp_path_factory.mktemp("sdk-lab")) as lab:
        yield lab
