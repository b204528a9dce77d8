"""Django middleware that puts each request's gray route (flag, lane, versions) in the context
variable:

    MIDDLEWARE = ["dataplane.sdk.django_middleware.GrayFlagMiddleware", ...]

Django's middleware protocol is duck-typed (a class taking `get_response`, called with the
request; `sync_capable` / `async_capable` say which chains it joins), so this module needs no
Django import and the data plane keeps running without Django. Under ASGI, Django runs a sync
view in a thread through asgiref's `sync_to_async`, which carries the context, so the view
sees the route either way.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from .flag import Route, reset_route, route_of, set_route


class GrayFlagMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any):
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self._async:
            return self._acall(request)
        token = set_route(_route_of_request(request))
        try:
            return self.get_response(request)
        finally:
            reset_route(token)

    async def _acall(self, request: Any) -> Any:
        token = set_route(_route_of_request(request))
        try:
            return await self.get_response(request)
        finally:
            reset_route(token)


def _route_of_request(request: Any) -> Route | None:
    return route_of({name.lower(): value for name, value in request.headers.items()})
