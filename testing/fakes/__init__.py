"""Contract fakes (test code): in-memory Nacos and Eureka servers over real loopback HTTP,
a Nacos config center, a Kubernetes API server (EndpointSlices and Pods), and a push gateway.

Not Nacos, not Eureka, not Kubernetes: they serve the paths, parameters, response shapes and
error codes of the documented protocols (the Nacos naming and config Open API, the Eureka REST
operations, the Kubernetes API) as written down from those projects' source and docs, and
nothing more. A test passing against them proves that Graylane speaks the protocol as
documented, not that a real server behaves the same. docs/architecture.md says where they are used.
"""

from .eureka_fake import FakeEureka
from .http_fake import FakeHTTPServer
from .kubernetes_fake import FakeKubernetes
from .nacos_fake import FakeNacos, FakeNacosInstance

__all__ = ["FakeEureka", "FakeHTTPServer", "FakeKubernetes", "FakeNacos", "FakeNacosInstance"]
