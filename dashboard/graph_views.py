from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.decorators import role_required
from accounts.roles import VIEWER
from call_graph.graph import recent_graph

from .service_graph import Drawing, draw


def current_drawing() -> Drawing:
    """The service graph of the recent calls, as the overview shows it."""
    return draw(recent_graph())


@role_required(VIEWER)
def service_graph(request: HttpRequest) -> HttpResponse:
    """The overview's service graph alone: what static/js/service_graph.js swaps in when
    calls are recorded."""
    return render(request, "dashboard/_service_graph.html", {"service_graph": current_drawing()})
