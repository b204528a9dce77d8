"""Registry adapters (plain Python, no Django): Nacos, Eureka, Kubernetes and Consul behind one
small interface."""

import outbound

from .base import (
    ADAPTER_KINDS,
    DEFAULT_GROUP,
    DEFAULT_NAMESPACE,
    TERMINATING,
    RegistryAdapter,
    RegistryError,
    RegistryInstance,
    SkippedInstance,
)
from .consul import ConsulAdapter
from .eureka import EurekaAdapter
from .kubernetes import DEFAULT_VERSION_LABEL, KubernetesAdapter
from .nacos import NacosAdapter

__all__ = [
    "ADAPTER_KINDS",
    "ConsulAdapter",
    "DEFAULT_VERSION_LABEL",
    "TERMINATING",
    "EurekaAdapter",
    "KubernetesAdapter",
    "NacosAdapter",
    "RegistryAdapter",
    "RegistryError",
    "RegistryInstance",
    "SkippedInstance",
    "build_adapter",
]


def build_adapter(
    kind: str,
    *,
    base_url: str,
    namespace: str = DEFAULT_NAMESPACE,
    group: str = DEFAULT_GROUP,
    username: str = "",
    password: str = "",
    api_version: str = "auto",
    version_label: str = DEFAULT_VERSION_LABEL,
    token: str = "",
    kubeconfig: str = "",
    datacenter: str = "",
    version_key: str = "version",
    timeout: float = 3.0,
    policy: outbound.Policy = outbound.DEFAULT_POLICY,
) -> RegistryAdapter:
    """Build the adapter for a registry ``kind`` ("nacos", "eureka", "kubernetes" or "consul").

    ``namespace``, ``group`` and ``api_version`` only mean something for Nacos; Eureka ignores
    them. ``username``/``password`` are Nacos login credentials, or HTTP basic auth for Eureka.
    Kubernetes reads the comma-separated namespaces in ``namespace``, the version from the
    Pods' label ``version_label``, and signs in with ``token``, else ``kubeconfig`` (a file),
    else the service account it runs as. Consul reads ``datacenter``, sends ``token`` as its
    ACL token and takes the version from the Meta key ``version_key``.
    ``policy``: where the adapter may connect (outbound/policy.py).
    Raises ``ValueError`` for an unknown kind or api_version (a configuration error, not a
    registry failure). No network traffic happens here.
    """
    normalized = (kind or "").strip().lower()
    if normalized == "nacos":
        return NacosAdapter(
            base_url,
            namespace=namespace,
            group=group,
            username=username,
            password=password,
            api_version=api_version,
            timeout=timeout,
            policy=policy,
        )
    if normalized == "eureka":
        return EurekaAdapter(
            base_url, username=username, password=password, timeout=timeout, policy=policy
        )
    if normalized == "kubernetes":
        return KubernetesAdapter(
            base_url,
            namespaces=namespace.split(","),
            version_label=version_label,
            token=token,
            kubeconfig=kubeconfig,
            timeout=timeout,
            policy=policy,
        )
    if normalized == "consul":
        return ConsulAdapter(
            base_url,
            datacenter=datacenter,
            token=token,
            version_key=version_key,
            timeout=timeout,
            policy=policy,
        )
    raise ValueError(f"unknown registry kind {kind!r}; expected one of {', '.join(ADAPTER_KINDS)}")
