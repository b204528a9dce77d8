"""Registry adapters (plain Python, no Django): Nacos and Eureka behind one small interface."""

from .base import (
    ADAPTER_KINDS,
    RegistryAdapter,
    RegistryError,
    RegistryInstance,
    build_adapter,
)
from .eureka import EurekaAdapter
from .nacos import NacosAdapter

__all__ = [
    "ADAPTER_KINDS",
    "EurekaAdapter",
    "NacosAdapter",
    "RegistryAdapter",
    "RegistryError",
    "RegistryInstance",
    "build_adapter",
]
