import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
django.setup(set_prefix=False)  # as Django's get_asgi_application(): the prefix is per request

# Channels and the consumers import models, so they come after Django is set up.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.handlers.wsgi import WSGIHandler  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402
from embedded_registry.nacos_grpc.server import WithNacosGrpc  # noqa: E402
from gateways.protocol import wakeup  # noqa: E402
from gateways.protocol.asgi import with_gateway_endpoints  # noqa: E402
from graylane.background import start_in_process_jobs  # noqa: E402
from graylane.long_lived import freeze_after_start, size_for_held_polls  # noqa: E402
from graylane.wsgi_in_asgi import WsgiInAsgi  # noqa: E402

# The Nacos 2.x gRPC naming server starts beside this one (docs/deploy.md). The gateway
# endpoints are answered before Channels' router: one coroutine fewer in the chain every
# poll's task resumes through (py-spy found 7 % of a replica's samples in the router's
# frame with 5,000 gateways polling, bench/fleet.py); everything else goes through it.
application = WithNacosGrpc(
    with_gateway_endpoints(
        ProtocolTypeRouter(
            {
                "http": WsgiInAsgi(WSGIHandler(), settings.WEB_THREADS),
                "websocket": AllowedHostsOriginValidator(
                    AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
                ),
            }
        )
    )
)

start_in_process_jobs()
freeze_after_start()
wakeup.watch.waking = size_for_held_polls
