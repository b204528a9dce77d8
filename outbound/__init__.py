"""Where Graylane's own HTTP calls may go (policy.py says why and how)."""

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
