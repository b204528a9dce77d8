"""Outgoing `requests` calls send the request's gray route on (flag, lane, versions), through
a transport adapter:

    session = gray_session()            # or session.mount(prefix, GrayFlagAdapter())

(requests has no request hook; an adapter sees every prepared request, redirects included.)
"""

from __future__ import annotations

from typing import Any

import requests
from requests.adapters import HTTPAdapter

from .flag import outgoing_headers


class GrayFlagAdapter(HTTPAdapter):
    """requests' HTTPAdapter that adds the route to each request it sends."""

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any):
        request.headers.update(outgoing_headers(request.headers))
        return super().send(request, *args, **kwargs)


def gray_session() -> requests.Session:
    """A requests.Session that sends the route on, over HTTP and HTTPS."""
    session = requests.Session()
    for prefix in ("http://", "https://"):
        session.mount(prefix, GrayFlagAdapter())
    return session
