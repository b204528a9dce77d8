"""Settings read from the environment: a bad value stops startup with a message naming it."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from graylane.env import env_float, env_int


def test_numbers_are_read_with_their_defaults(monkeypatch):
    monkeypatch.setenv("GRAYLANE_TEST_N", "12")
    assert env_int("GRAYLANE_TEST_N", 3) == 12
    assert env_float("GRAYLANE_TEST_N", 3.0) == 12.0
    monkeypatch.setenv("GRAYLANE_TEST_N", " ")
    assert env_int("GRAYLANE_TEST_N", 3) == 3
    monkeypatch.delenv("GRAYLANE_TEST_N")
    assert env_float("GRAYLANE_TEST_N", 2.5) == 2.5


@pytest.mark.parametrize(
    "reader,raw,message",
    [
        (env_int, "1.5", "is not a whole number"),
        (env_int, "lots", "is not a whole number"),
        (env_int, "0", "must be at least 1"),
        (env_float, "soon", "is not a number"),
        (env_float, "0.5", "must be at least 1"),
    ],
)
def test_bad_numbers_are_refused_by_name(monkeypatch, reader, raw, message):
    monkeypatch.setenv("GRAYLANE_TEST_N", raw)
    with pytest.raises(ImproperlyConfigured, match=f"GRAYLANE_TEST_N='{raw}' {message}"):
        reader("GRAYLANE_TEST_N", 5, minimum=1)
