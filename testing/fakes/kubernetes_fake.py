"""contract fake: not Kubernetes. It serves the few Kubernetes API operations Graylane's
Kubernetes registry uses, as the Kubernetes API documentation describes them, and nothing more.

Test code only. ``FakeKubernetes`` is an in-memory API server behind a real HTTP server on
127.0.0.1 (docs/architecture.md, "Kubernetes registry contract", lists the documented facts
and their pages):

* ``GET /apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices``: an ``EndpointSliceList``
  whose ``metadata.resourceVersion`` is the version to watch from.
* the same with ``watch=1&resourceVersion=R``: a chunked stream of JSON lines ``{"type":
  "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": ...}``, every change after R, then
  the changes as they happen, until ``timeoutSeconds``; with ``allowWatchBookmarks=true`` a
  ``BOOKMARK`` at the end carrying the current version. A version older than the history kept
  (``compact()``) answers an ``ERROR`` event whose object is a ``Status`` with ``code: 410``
  (reason ``Expired``), as the API server does; ``gone_as_status=True`` answers HTTP 410 instead.
* ``GET /api/v1/namespaces/{ns}/pods``: a ``PodList``; ``.../pods/{name}``: the Pod, or a 404
  ``Status``.
* ``Authorization: Bearer <token>`` is required when ``token`` is set (401 ``Status`` otherwise).

The objects are built with the official ``kubernetes`` client's models and serialised by its
``ApiClient``, so field names and nesting are the API's own (camelCase JSON).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from .http_fake import FakeHTTPServer, FakeRequest, FakeResponse, json_reply

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
SLICES = re.compile(r"/apis/discovery\.k8s\.io/v1/namespaces/([^/]+)/endpointslices\Z")
PODS = re.compile(r"/api/v1/namespaces/([^/]+)/pods\Z")
POD = re.compile(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)\Z")
_serialize = k8s.ApiClient().sanitize_for_serialization


@dataclass
class FakeEndpoint:
    """One endpoint of a slice: the Pod it stands for (its address is the Pod's) or, with no
    pod, a bare address; the three documented conditions (None: left out, "unknown")."""

    pod: str | None = None
    address: str | None = None
    ready: bool | None = True
    serving: bool | None = None
    terminating: bool | None = None


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``Status`` object, the API's body for errors (and a watch ERROR event's object)."""
    return _serialize(
        k8s.V1Status(
            api_version="v1",
            kind="Status",
            metadata=k8s.V1ListMeta(),
            status="Failure",
            message=message,
            reason=reason,
            code=code,
        )
    )


class FakeKubernetes(FakeHTTPServer):
    """In-memory Kubernetes API server (EndpointSlices and Pods) over real HTTP; see the
    module docstring."""

    def __init__(self, token: str | None = None, *, gone_as_status: bool = False):
        super().__init__()
        self.token = token
        self.gone_as_status = gone_as_status
        self.changed = threading.Condition(self.lock)
        self.revision = 100  # etcd's revision: one counter for every object
        self.oldest = self.revision  # compact(): history before this is gone
        self.slices: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # rv, ns, type, object
        self.pod_reads = 0

    # -- test helpers -----------------------------------------------------------------------

    def put_pod(
        self, namespace: str, name: str, ip: str, labels: dict[str, str] | None = None
    ) -> None:
        with self.lock:
            self.revision += 1
            pod = k8s.V1Pod(
                api_version="v1",
                kind="Pod",
                metadata=k8s.V1ObjectMeta(
                    name=name,
                    namespace=namespace,
                    uid=str(uuid.uuid4()),
                    labels=dict(labels or {}),
                    resource_version=str(self.revision),
                ),
                status=k8s.V1PodStatus(pod_ip=ip, pod_ips=[k8s.V1PodIP(ip=ip)]),
            )
            self.pods[namespace, name] = _serialize(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        with self.lock:
            del self.pods[namespace, name]

    def put_slice(
        self,
        namespace: str,
        name: str,
        service: str | None,
        endpoints: list[FakeEndpoint],
        ports: list[tuple[str | None, int]] | None = None,
        address_type: str = "IPv4",
        labels: dict[str, str] | None = None,
    ) -> None:
        """Create (ADDED) or replace (MODIFIED) an EndpointSlice; ``service``: its
        ``kubernetes.io/service-name`` label (None: a slice of no Service)."""
        with self.lock:
            self.revision += 1
            all_labels = dict(labels or {})
            if service is not None:
                all_labels[SERVICE_NAME_LABEL] = service
            endpoint_slice = k8s.V1EndpointSlice(
                api_version="discovery.k8s.io/v1",
                kind="EndpointSlice",
                metadata=k8s.V1ObjectMeta(
                    name=name,
                    namespace=namespace,
                    labels=all_labels,
                    resource_version=str(self.revision),
                ),
                address_type=address_type,
                endpoints=[self._endpoint(namespace, e) for e in endpoints],
                ports=[
                    k8s.DiscoveryV1EndpointPort(name=port_name, port=port, protocol="TCP")
                    for port_name, port in (ports if ports is not None else [("http", 8080)])
                ],
            )
            served = _serialize(endpoint_slice)
            kind = "MODIFIED" if (namespace, name) in self.slices else "ADDED"
            self.slices[namespace, name] = served
            self._record(namespace, kind, served)

    def delete_slice(self, namespace: str, name: str) -> None:
        with self.lock:
            self.revision += 1
            served = dict(self.slices.pop((namespace, name)))
            served["metadata"] = {**served["metadata"], "resourceVersion": str(self.revision)}
            self._record(namespace, "DELETED", served)

    def compact(self) -> None:
        """Forget the history so far, as etcd compaction does: a watch from an older version
        is answered 410 Gone."""
        with self.lock:
            self.oldest = self.revision
            self.events.clear()

    def watches(self) -> list[dict[str, str]]:
        return [p for p in self.requests_to("/endpointslices", "GET") if p.get("watch") == "1"]

    def lists(self) -> list[dict[str, str]]:
        return [p for p in self.requests_to("/endpointslices", "GET") if p.get("watch") != "1"]

    # -- serving ----------------------------------------------------------------------------

    def _endpoint(self, namespace: str, endpoint: FakeEndpoint) -> k8s.V1Endpoint:
        target = None
        address = endpoint.address or ""
        if endpoint.pod is not None:
            pod = self.pods[namespace, endpoint.pod]
            address = address or pod["status"]["podIP"]
            target = k8s.V1ObjectReference(
                kind="Pod", name=endpoint.pod, namespace=namespace, uid=pod["metadata"]["uid"]
            )
        return k8s.V1Endpoint(
            addresses=[address],
            conditions=k8s.V1EndpointConditions(
                ready=endpoint.ready, serving=endpoint.serving, terminating=endpoint.terminating
            ),
            target_ref=target,
        )

    def _record(self, namespace: str, kind: str, served: dict[str, Any]) -> None:
        self.events.append((self.revision, namespace, kind, served))
        self.changed.notify_all()

    def handle(self, request: FakeRequest) -> FakeResponse:
        if self.token and request.header("authorization") != f"Bearer {self.token}":
            return json_reply(status(401, "Unauthorized", "Unauthorized"), 401)
        if request.method != "GET":
            return json_reply(status(405, "MethodNotAllowed", "not served by this fake"), 405)
        if match := SLICES.match(request.path):
            if request.params.get("watch") in ("1", "true"):
                return self._watch(match[1], request.params)
            return self._list(match[1])
        if match := PODS.match(request.path):
            items = [pod for (ns, _name), pod in sorted(self.pods.items()) if ns == match[1]]
            return json_reply(
                {
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self.revision)},
                    "items": items,
                }
            )
        if match := POD.match(request.path):
            pod = self.pods.get((match[1], match[2]))
            self.pod_reads += 1
            if pod is None:
                message = f'pods "{match[2]}" not found'
                return json_reply(status(404, "NotFound", message), 404)
            return json_reply(pod)
        return json_reply(status(404, "NotFound", "the server could not find it"), 404)

    def _list(self, namespace: str) -> FakeResponse:
        items = [s for (ns, _name), s in sorted(self.slices.items()) if ns == namespace]
        return json_reply(
            {
                "kind": "EndpointSliceList",
                "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.revision)},
                "items": items,
            }
        )

    def _watch(self, namespace: str, params: dict[str, str]) -> FakeResponse:
        since = int(params.get("resourceVersion") or self.revision)
        if since < self.oldest:
            gone = status(410, "Expired", f"too old resource version: {since} ({self.oldest})")
            if self.gone_as_status:
                return json_reply(gone, 410)
            return FakeResponse(
                200, content_type="application/json", chunks=iter([_line("ERROR", gone)])
            )
        seconds = float(params.get("timeoutSeconds") or 30)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        return FakeResponse(
            200,
            content_type="application/json",
            chunks=self._stream(namespace, since, time.monotonic() + seconds, bookmarks),
        )

    def _stream(
        self, namespace: str, since: int, deadline: float, bookmarks: bool
    ) -> Iterator[bytes]:
        """The namespace's events after ``since`` as they come, until ``deadline``."""
        while not self._stopping.is_set():
            with self.lock:
                pending = [e for e in self.events if e[0] > since and e[1] == namespace]
                if not pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.changed.wait(min(left, 0.05))
                    continue
            for revision, _ns, kind, served in pending:
                since = revision
                yield _line(kind, served)
        if bookmarks:
            with self.lock:
                current = str(self.revision)
            marker = {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                      "metadata": {"resourceVersion": current}}  # fmt: skip
            yield _line("BOOKMARK", marker)


def _line(kind: str, served: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": served}).encode() + b"\n"
