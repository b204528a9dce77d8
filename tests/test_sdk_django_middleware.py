"""dataplane/sdk/django_middleware.py in Django's own middleware chain, sync and async (the
SDK's Django adapter imports no Django, so its test lives here, outside the data plane)."""

import asyncio

from asgiref.sync import iscoroutinefunction
from django.http import HttpResponse
from django.test import RequestFactory

from dataplane.sdk.django_middleware import GrayFlagMiddleware
from dataplane.sdk.flag import current_flag


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
