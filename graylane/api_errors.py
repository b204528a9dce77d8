"""One error shape for the whole API: DRF's `{"field": ["message"]}`, and `{"detail": ...}`
for everything that is not about a field.

Errors Django answers itself (no URL matched, a bad request, a server error) are JSON too
under /api/ and /nacos/, where clients are programs (`handler400` ... in graylane/urls.py);
elsewhere they are Django's pages."""

from django.http import HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import requires_csrf_token
from rest_framework.views import exception_handler as drf_exception_handler

JSON_PREFIXES = ("/api/", "/nacos/")


def exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, list):
        response.data = {"non_field_errors": response.data}
    return response


def wants_json(request) -> bool:
    return request.path.startswith(JSON_PREFIXES)


def error_response(request, status: int, content: dict) -> HttpResponse:
    """JSON under /api/ and /nacos/, plain text elsewhere."""
    if wants_json(request):
        return JsonResponse(content, status=status)
    text = content.get("detail") or "; ".join(f"{k}: {' '.join(v)}" for k, v in content.items())
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


@requires_csrf_token
def bad_request(request, exception):
    if wants_json(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


@requires_csrf_token
def permission_denied(request, exception):
    if wants_json(request):
        detail = "You do not have permission to perform this action."
        return JsonResponse({"detail": detail}, status=403)
    return defaults.permission_denied(request, exception)


@requires_csrf_token
def page_not_found(request, exception):
    if wants_json(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


@requires_csrf_token
def server_error(request):
    if wants_json(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return defaults.server_error(request)
