import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
django_asgi_app = get_asgi_application()

# Channels and the consumers import models, so they come after Django is set up.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402
from gateways.asgi import with_gateway_endpoints  # noqa: E402
from graylane.background import start_in_process_jobs  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_gateway_endpoints(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

start_in_process_jobs()
