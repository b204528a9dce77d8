"""Serving the gateway endpoints (gateways/gateway_api.py) without a thread per request.

Django's ASGI handler runs every request in its own thread-sensitive context: the first
sync call of the request (the `request_started` receivers, sync middleware) creates a
thread that lives until the request ends, and with a sync-only middleware in the chain
(WhiteNoise) that thread even blocks in async_to_sync while the async view waits. For a
long poll that is one thread per waiting gateway (measured: 30 waiting polls, 30 threads).

This handler serves those endpoints with the same URL conf and views, but without
middleware (the views authenticate themselves and use no session, cookie or CSRF) and
without the per-request context: Django's few sync calls per request run on asgiref's
shared thread, so a waiting gateway costs a coroutine, and an ack skips the middleware.
Every other request goes to Django as before.
"""

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.urls import Resolver404, resolve

from gateways.gateway_api import gateway_ack, gateway_config

GATEWAY_VIEWS = {gateway_config, gateway_ack}


class GatewayEndpointsHandler(ASGIHandler):
    def load_middleware(self, is_async=False):
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        self._middleware_chain = convert_exception_to_response(self._get_response_async)

    async def __call__(self, scope, receive, send):
        # Django's __call__ without `async with ThreadSensitiveContext()` (module docstring).
        await self.handle(scope, receive, send)

    async def get_response_async(self, request):
        response = await super().get_response_async(request)
        # CommonMiddleware sets it for the other views; without it every answer is chunked.
        if not response.streaming and not response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))
        return response


def _is_gateway_endpoint(path: str) -> bool:
    # Resolving a path no pattern matches is slow (Django lists what it tried): resolve only
    # the paths that can be gateway endpoints.
    if not path.endswith(("/gateway-config/", "/ack/")):
        return False
    try:
        return resolve(path).func in GATEWAY_VIEWS
    except Resolver404:
        return False


def with_gateway_endpoints(django_app):
    """The ASGI app for HTTP: gateway endpoints to GatewayEndpointsHandler, the rest to
    `django_app`."""
    handler = GatewayEndpointsHandler()

    async def app(scope, receive, send):
        if scope["type"] == "http" and _is_gateway_endpoint(scope["path"]):
            await handler(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return app
