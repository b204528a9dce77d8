"""Contract fakes (test code): in-memory Nacos and Eureka servers over real loopback HTTP.

Not Nacos, not Eureka: they serve the shapes recorded in shared/contracts/registry-contracts.md.
"""

from .eureka_fake import FakeEureka
from .http_fake import FakeHTTPServer
from .nacos_fake import FakeNacos, FakeNacosInstance

__all__ = ["FakeEureka", "FakeHTTPServer", "FakeNacos", "FakeNacosInstance"]
