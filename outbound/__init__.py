"""Graylane's own HTTP calls: where they may go (policy.py says why and how), and how their
answers are quoted in errors (answers.py)."""

from .policy import (
    DEFAULT_ALLOWED,
    DEFAULT_DENIED,
    DEFAULT_POLICY,
    AddressRefused,
    GuardedTransport,
    Policy,
)

__all__ = [
    "DEFAULT_ALLOWED",
    "DEFAULT_DENIED",
    "DEFAULT_POLICY",
    "AddressRefused",
    "GuardedTransport",
    "Policy",
]
