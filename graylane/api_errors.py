"""One error shape for the whole API: DRF's `{"field": ["message"]}`, and `{"detail": ...}`
for everything that is not about a field.

Errors Django answers itself (no URL matched, a bad request, a server error) are JSON too
under /api/ and /nacos/, where clients are programs (`handler400` ... in graylane/urls.py);
elsewhere they are Django's pages."""

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import requires_csrf_token
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

JSON_PREFIXES = ("/api/", "/nacos/")


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, list):
        response.data = {"non_field_errors": response.data}
    return response


def wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(JSON_PREFIXES)


def error_response(request: HttpRequest, status: int, content: dict[str, Any]) -> HttpResponse:
    """JSON under /api/ and /nacos/, plain text elsewhere."""
    if wants_json(request):
        return JsonResponse(content, status=status)
    text = content.get("detail") or "; ".join(f"{k}: {' '.join(v)}" for k, v in content.items())
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def _json_or_page(
    status: int, detail: str, page: Callable[..., HttpResponse]
) -> Callable[..., HttpResponse]:
    """Django's error handler `page`, answering `{"detail": detail}` under JSON_PREFIXES."""

    @requires_csrf_token
    def handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if wants_json(request):
            return JsonResponse({"detail": detail}, status=status)
        return page(request) if status == 500 else page(request, exception)

    return handler


bad_request = _json_or_page(400, "Bad request.", defaults.bad_request)
permission_denied = _json_or_page(
    403, "You do not have permission to perform this action.", defaults.permission_denied
)
page_not_found = _json_or_page(404, "Not found.", defaults.page_not_found)
server_error = _json_or_page(500, "Server error.", defaults.server_error)
