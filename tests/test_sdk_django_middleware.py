"""dataplane/sdk/django_middleware.py in Django's own middleware chain, sync and async (the
SDK's Django adapter imports no Django, so its test lives here, outside the data plane)."""

import asyncio

from asgiref.sync import iscoroutinefunction
from django.http import HttpResponse
from django.test import RequestFactory

from dataplane.sdk.django_middleware import GrayFlagMiddleware
from dataplane.sdk.flag import current_flag, current_route


def sync_view(request):
    return HttpResponse(str(current_flag()))


async def async_view(request):
    await asyncio.sleep(0)
    return HttpResponse(str(current_flag()))


def test_sync_chain_sets_the_flag_for_the_view_and_clears_it_after():
    middleware = GrayFlagMiddleware(sync_view)
    request = RequestFactory().get("/", headers={"X-Gray-Status": "gray"})
    assert middleware(request).content == b"GRAY"
    assert current_flag() is None
    assert middleware(RequestFactory().get("/")).content == b"None"


def test_async_chain_sets_the_flag_for_the_view_and_clears_it_after():
    middleware = GrayFlagMiddleware(async_view)
    assert iscoroutinefunction(middleware)  # what Django asks to keep the chain async

    async def serve():
        request = RequestFactory().get("/", headers={"baggage": "graylane.gray=PROD"})
        response = await middleware(request)
        return response.content, current_flag()

    assert asyncio.run(serve()) == (b"PROD", None)


def route_view(request):
    route = current_route()
    return HttpResponse(f"{route.flag} {route.lane} {route.versions}" if route else "None")


def test_the_chain_sets_the_whole_route_from_the_headers_or_else_the_baggage():
    middleware = GrayFlagMiddleware(route_view)
    headers = {"X-Gray-Status": "GRAY", "X-Gray-Lane": "feature-x", "X-Gray-Versions": "*=V1"}
    assert middleware(RequestFactory().get("/", headers=headers)).content == b"GRAY feature-x *=V1"
    baggage = {"baggage": "graylane.lane=feature-x,graylane.gray=GRAY"}
    assert middleware(RequestFactory().get("/", headers=baggage)).content == b"GRAY feature-x None"
    # The flag from the header, so the lane from the header too, never from the baggage.
    both = {"X-Gray-Status": "GRAY", **baggage}
    assert middleware(RequestFactory().get("/", headers=both)).content == b"GRAY None None"
    assert current_route() is None
