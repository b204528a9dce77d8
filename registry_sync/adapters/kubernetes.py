"""Kubernetes registry adapter: the EndpointSlices (``discovery.k8s.io/v1``) of chosen namespaces,
by list + watch; the version from a label of each endpoint's Pod.

The facts it relies on, with the Kubernetes documentation pages they come from, are in
docs/architecture.md ("Kubernetes registry contract").

* A Graylane service is a Kubernetes Service: the EndpointSlices labelled
  ``kubernetes.io/service-name``, joined. A Service name found in two of the chosen namespaces
  is skipped (with why), not merged: they are different services.
* An instance is one endpoint: its first address, and the slice's port named ``http``, else
  its first port. Its id is ``namespace:pod:address:port`` (``namespace:address:port`` with no
  Pod), unique across the IPv4 and IPv6 slices of a dual-stack Service.
* States: ``terminating`` → DRAINING (not routable while it finishes its requests: lossless
  rule 2), else ``ready`` (unknown counts as ready, as documented) → UP, else UNHEALTHY.
* Version: the label ``version_label`` (default ``app.kubernetes.io/version``) of the Pod the
  endpoint's ``targetRef`` names: every Pod of the namespace is listed with the slices, a Pod
  started since is read once (by uid), and what was read is kept until the next relist;
  an endpoint with no Pod takes the label from its EndpointSlice (which the controller copies
  from the Service). No such label: no version, as a Nacos instance without ``version``
  metadata (the registry's ``default_version``, else ALL traffic only). Reading the Pod is
  what lets one Service hold two versions (a canary) with their own versions.
* Sync passes: the first lists each namespace and remembers its ``resourceVersion``
  (kubernetes_watch.py); each later pass resumes the watch from there for ``watch_seconds``
  (the server ends it: ``timeoutSeconds``), applying ADDED/MODIFIED/DELETED and moving on
  at each BOOKMARK. So a pass costs a short request, whatever the cluster's size, and changes
  between passes are never missed: the server replays them. 410 Gone (an ERROR event or the
  HTTP status: the history was compacted) lists again. Anything else failing is a
  RegistryError, and the sync marks the registry stale and deletes nothing. A long-lived
  watcher thread would see changes sooner, but the sync only writes once per pass anyway, and
  a thread would outlive the Celery task that owns the adapter.
* Transport: httpx through the outbound policy, as every adapter, so each connection is
  checked (the official ``kubernetes`` client's urllib3 pool would bypass it). The client
  library reads what it is best at: kubeconfig files and the in-cluster service account.
* Graylane cannot take an endpoint out of traffic in Kubernetes (the EndpointSlice
  controller owns slices and would undo it): ``set_enabled`` changes nothing there and
  ``disables_in_registry`` is False, so an operator's offline is kept by Graylane alone (the
  gateway documents leave the instance out) and the sync does not re-apply it.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import quote, urlsplit

import httpx

import outbound

from . import validation
from .base import (
    DEFAULT_CLUSTER,
    TERMINATING,
    RegistryError,
    RegistryInstance,
    SkippedInstance,
)
from .http_transport import HttpTransport
from .kubernetes_watch import PROCESS_WATCHES, NamespaceWatch, WatchStore

DEFAULT_VERSION_LABEL = "app.kubernetes.io/version"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
HTTP_PORT_NAME = "http"
SLICES_PATH = "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
WATCH_SECONDS = 1
READY, NOT_READY = "UP", "NOT_READY"


class Gone(Exception):
    """410 Gone: the server no longer has the history the watch asked for."""


@dataclass(frozen=True)
class Access:
    """Where the API server is and how to show who we are."""

    server: str
    authorization: str  # the Authorization header ("Bearer ..."), empty: none
    verify: ssl.SSLContext | bool = True


def resolve_access(base_url: str, token: str, kubeconfig: str) -> Access:
    """A bearer token for ``base_url`` (whose certificate the system's CAs must trust); else
    the kubeconfig file at ``kubeconfig`` (its current context, with the cluster's CA;
    ``base_url``, if set, overrides its server); else the service account of the Pod Graylane
    runs in. A configuration that cannot be read is a RegistryError."""
    if token:
        return Access(base_url, f"Bearer {token}")
    # Imported here: the client package is large, and only these registries need it.
    from kubernetes import client, config

    configuration = client.Configuration()
    verify: ssl.SSLContext | bool = False
    try:
        if kubeconfig:
            config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        else:
            config.load_incluster_config(client_configuration=configuration)
        if configuration.verify_ssl:  # the cluster's CA (and client certificate) if it has one
            verify = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
            if configuration.cert_file:
                verify.load_cert_chain(configuration.cert_file, configuration.key_file)
    except (config.ConfigException, OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        source = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster service account"
        raise RegistryError(f"Kubernetes: cannot use the {source}: {exc}") from exc
    authorization = configuration.get_api_key_with_prefix("BearerToken") or ""
    return Access(base_url or configuration.host, authorization, verify)


def _port(ports: Any) -> int:
    if not isinstance(ports, list) or not ports:
        raise validation.InvalidInstance("port", "the EndpointSlice lists no port")
    named = [p for p in ports if isinstance(p, dict) and p.get("name") == HTTP_PORT_NAME]
    chosen = (named or ports)[0]
    return validation.as_port(chosen.get("port") if isinstance(chosen, dict) else None)


def _status(conditions: Any) -> str:
    conditions = conditions if isinstance(conditions, dict) else {}
    if conditions.get("terminating") is True:
        return TERMINATING
    return NOT_READY if conditions.get("ready") is False else READY


class KubernetesAdapter:
    """Registry adapter for Kubernetes EndpointSlices. See the module docstring."""

    kind = "kubernetes"
    lists_disabled = True  # not-ready and terminating endpoints stay in their slices
    disables_in_registry = False

    def __init__(
        self,
        base_url: str,
        *,
        namespaces: Sequence[str],
        version_label: str = DEFAULT_VERSION_LABEL,
        token: str = "",
        kubeconfig: str = "",
        timeout: float = 3.0,
        watch_seconds: int = WATCH_SECONDS,
        policy: outbound.Policy = outbound.DEFAULT_POLICY,
        watches: WatchStore = PROCESS_WATCHES,
    ):
        self.namespaces = [n for n in (s.strip() for s in namespaces) if n]
        if not self.namespaces:
            raise ValueError("Kubernetes needs at least one namespace")
        if token and not urlsplit(base_url or "").netloc:
            raise ValueError(
                f"Kubernetes base_url must look like https://host:6443, got {base_url!r}"
            )
        self.base_url = (base_url or "").strip().rstrip("/")
        self.version_label = version_label or DEFAULT_VERSION_LABEL
        self.watch_seconds = watch_seconds
        self._token, self._kubeconfig = token, kubeconfig
        self._timeout, self._policy, self._watches = timeout, policy, watches
        self._http: HttpTransport | None = None
        self._server = self.base_url
        # service -> (namespace, slice), as this pass caught up with them (list_services)
        self._by_service: dict[str, list[tuple[str, dict[str, Any]]]] | None = None

    # -- public API -------------------------------------------------------------------------

    def list_services(self) -> list[str]:
        by_service: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for namespace in self.namespaces:
            watch = self._caught_up(namespace)
            for endpoint_slice in watch.slices.values():
                service = endpoint_slice["metadata"]["labels"][SERVICE_NAME_LABEL]
                by_service.setdefault(service, []).append((namespace, endpoint_slice))
        self._by_service = by_service
        return sorted(by_service)

    def list_instances(self, service: str) -> list[RegistryInstance | SkippedInstance]:
        if self._by_service is None:
            self.list_services()
        assert self._by_service is not None
        slices = self._by_service.get(service, [])
        namespaces = sorted({namespace for namespace, _slice in slices})
        if len(namespaces) > 1:
            reason = (
                f"a Service of this name is in namespaces {', '.join(namespaces)}; "
                "choose one of them for this registry"
            )
            return [SkippedInstance(service, None, reason)]
        result: list[RegistryInstance | SkippedInstance] = []
        for namespace, endpoint_slice in slices:
            result.extend(self._instances(service, namespace, endpoint_slice))
        return result

    def set_enabled(self, instance: RegistryInstance, enabled: bool) -> None:
        """Nothing to do in Kubernetes (see the module docstring)."""

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- list + watch -----------------------------------------------------------------------

    def _transport(self) -> HttpTransport:
        if self._http is None:
            access = resolve_access(self.base_url, self._token, self._kubeconfig)
            self._server = access.server.rstrip("/")
            headers = {"Accept": "application/json"}
            if access.authorization:
                headers["Authorization"] = access.authorization
            self._http = HttpTransport(
                "Kubernetes",
                timeout=self._timeout,
                headers=headers,
                policy=self._policy,
                verify=access.verify,
            )
        return self._http

    def _caught_up(self, namespace: str) -> NamespaceWatch:
        http = self._transport()
        watch = self._watches.of(self._server, namespace)
        if watch.resource_version is not None:
            try:
                self._resume(http, namespace, watch)
            except Gone:
                watch.forget()
            else:
                _drop_unreferenced_pods(watch)
                return watch
        self._list(http, namespace, watch)
        return watch

    def _slices_url(self, namespace: str) -> str:
        return (
            f"{self._server}/apis/discovery.k8s.io/v1/namespaces/{quote(namespace)}/endpointslices"
        )

    def _list(self, http: HttpTransport, namespace: str, watch: NamespaceWatch) -> None:
        response = http.send("GET", self._slices_url(namespace))
        body = http.json(response)
        try:
            version = body["metadata"]["resourceVersion"]
            items = body["items"] or []
        except (KeyError, TypeError):
            raise http.error(response, "answered an unexpected EndpointSliceList") from None
        watch.slices = {}
        for item in items:
            _apply(watch, "ADDED", item)
        watch.pod_labels = self._pods_labels(http, namespace)
        watch.resource_version = str(version)

    def _pods_labels(self, http: HttpTransport, namespace: str) -> dict[str, dict[str, str]]:
        """The labels of every Pod of the namespace, by uid: one request where reading the
        Pods behind the slices one by one would take one each."""
        response = http.send("GET", f"{self._server}/api/v1/namespaces/{quote(namespace)}/pods")
        try:
            return {
                pod["metadata"]["uid"]: pod["metadata"].get("labels") or {}
                for pod in http.json(response)["items"] or []
            }
        except (KeyError, TypeError, AttributeError):
            raise http.error(response, "answered an unexpected PodList") from None

    def _resume(self, http: HttpTransport, namespace: str, watch: NamespaceWatch) -> None:
        """The changes since ``watch.resource_version``, applied as they come, until the
        server ends the watch (or it overruns its time: the next pass resumes)."""
        params = {
            "watch": "1",
            "resourceVersion": watch.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_seconds),
        }
        deadline = time.monotonic() + self.watch_seconds + self._timeout
        with http.stream("GET", self._slices_url(namespace), params=params) as response:
            if response.status_code == 410:
                raise Gone
            if not response.is_success:
                response.read()
                raise http.error(response, "refused the watch")
            for line in response.iter_lines():
                if line.strip():
                    self._event(response, line, watch)
                if time.monotonic() > deadline:
                    break

    def _event(self, response: httpx.Response, line: str, watch: NamespaceWatch) -> None:
        try:
            event = json.loads(line)
            kind, obj = event["type"], event["object"]
        except (ValueError, KeyError, TypeError):
            raise self._error(response, f"sent an unreadable watch event: {line[:200]}") from None
        if kind == "ERROR":
            if isinstance(obj, dict) and obj.get("code") == 410:
                raise Gone
            message = obj.get("message") if isinstance(obj, dict) else obj
            raise self._error(response, f"ended the watch with an error: {message}")
        try:
            version = obj["metadata"]["resourceVersion"]
        except (KeyError, TypeError):
            raise self._error(response, f"sent a {kind} event without resourceVersion") from None
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            _apply(watch, kind, obj)
        elif kind != "BOOKMARK":
            raise self._error(response, f"sent an unknown watch event type {kind!r}")
        watch.resource_version = str(version)

    def _error(self, response: httpx.Response, problem: str) -> RegistryError:
        shown = str(response.request.url.copy_with(query=None))
        return RegistryError(f"Kubernetes {problem} (GET {shown})", url=shown)

    # -- from slices to instances -----------------------------------------------------------

    def _instances(
        self, service: str, namespace: str, endpoint_slice: dict[str, Any]
    ) -> Iterable[RegistryInstance | SkippedInstance]:
        endpoints = endpoint_slice.get("endpoints") or []
        for endpoint in endpoints if isinstance(endpoints, list) else [endpoints]:
            try:
                yield self._instance(service, namespace, endpoint_slice, endpoint)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                yield validation.skipped(service, None, exc)

    def _instance(
        self,
        service: str,
        namespace: str,
        endpoint_slice: dict[str, Any],
        endpoint: dict[str, Any],
    ) -> RegistryInstance:
        host = validation.as_text("host", endpoint["addresses"][0])
        port = _port(endpoint_slice.get("ports"))
        target = endpoint.get("targetRef") or {}
        pod = target.get("name") if target.get("kind") == "Pod" else None
        labels = self._labels(namespace, target) if pod else endpoint_slice["metadata"]["labels"]
        metadata = {"kubernetes.namespace": namespace}
        if pod:
            metadata["kubernetes.pod"] = pod
        for key, name in (("nodeName", "kubernetes.node"), ("zone", "kubernetes.zone")):
            if isinstance(endpoint.get(key), str):
                metadata[name] = endpoint[key]
        version = (labels or {}).get(self.version_label)
        if isinstance(version, str):
            metadata["version"] = version
        status = _status(endpoint.get("conditions"))
        conditions = endpoint.get("conditions") or {}
        serving = conditions.get("serving", conditions.get("ready")) is not False
        return RegistryInstance(
            service=service,
            instance_id=":".join(str(part) for part in (namespace, pod, host, port) if part),
            host=host,
            port=port,
            weight=1.0,
            # terminating: whether it still serves what it was sent (it gets nothing new)
            healthy=serving if status == TERMINATING else status == READY,
            enabled=True,
            metadata=metadata,
            cluster=DEFAULT_CLUSTER,
            status=status,
        )

    def _labels(self, namespace: str, target: dict[str, Any]) -> dict[str, str]:
        """The Pod's labels: from the Pods listed with the slices, else read once (a Pod
        started since; by uid, so a Pod re-created under the same name is read again). A Pod
        already gone has none (its endpoint leaves soon after)."""
        watch = self._watches.of(self._server, namespace)
        uid = target.get("uid")
        if uid and uid in watch.pod_labels:
            return watch.pod_labels[uid]
        http = self._transport()
        url = f"{self._server}/api/v1/namespaces/{quote(namespace)}/pods/{quote(target['name'])}"
        response = http.send("GET", url)
        if response.status_code == 404:
            return {}
        pod = http.json(response)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if uid:
            watch.pod_labels[uid] = labels
        return labels


def _apply(watch: NamespaceWatch, kind: str, endpoint_slice: Any) -> None:
    """One change of a slice; slices of no Service (no ``kubernetes.io/service-name``) are not
    Graylane's concern."""
    metadata = endpoint_slice.get("metadata") if isinstance(endpoint_slice, dict) else None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        return
    if kind == "DELETED":
        watch.slices.pop(metadata["name"], None)
        return
    labels = metadata.get("labels")
    if isinstance(labels, dict) and isinstance(labels.get(SERVICE_NAME_LABEL), str):
        watch.slices[metadata["name"]] = endpoint_slice
    else:
        watch.slices.pop(metadata["name"], None)


def _drop_unreferenced_pods(watch: NamespaceWatch) -> None:
    """The labels of Pods no slice names any more: those Pods are gone."""
    referenced = {
        (endpoint.get("targetRef") or {}).get("uid")
        for endpoint_slice in watch.slices.values()
        for endpoint in endpoint_slice.get("endpoints") or []
        if isinstance(endpoint, dict)
    }
    for uid in [uid for uid in watch.pod_labels if uid not in referenced]:
        del watch.pod_labels[uid]
