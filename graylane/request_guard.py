"""Refusals made before anything reads the body or authenticates the caller (the first
middleware after the ones that only add headers):

* a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE, by its Content-Length: 413 (Django itself
  refuses it only when a view reads it, as a 400, after sessions and authentication);
* a NUL character in the path, the query or a form body: 400 with the parameter named.
  No URL or form field here can hold one, and PostgreSQL cannot store one, so a lookup
  with it would be a server error instead of an answer.

Under /api/ and /nacos/ the answers are JSON, as every error there (graylane.api_errors).
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, QueryDict

from graylane.api_errors import error_response

NUL = "\x00"


def _content_length(request: HttpRequest) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None


def _nul_parameter(params: QueryDict) -> str | None:
    for key, values in params.lists():
        if NUL in key or any(NUL in value for value in values):
            return key.replace(NUL, "\\x00")
    return None


class RequestGuardMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        refusal = self.refusal(request)
        return refusal if refusal is not None else self.get_response(request)

    def refusal(self, request: HttpRequest) -> HttpResponse | None:
        length = _content_length(request)
        if length is None or length < 0:
            return error_response(request, 400, {"detail": "A bad Content-Length header."})
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and length > limit:
            detail = f"The request body is larger than {limit} bytes."
            return error_response(request, 413, {"detail": detail})
        if NUL in request.path:
            return error_response(request, 400, {"detail": "The path holds a NUL character."})
        where = _nul_parameter(request.GET)
        if where is None and length and b"%00" in self._form_body(request):
            where = _nul_parameter(QueryDict(request.body))
        if where is not None:
            return error_response(request, 400, {where: ["Null characters are not allowed."]})
        return None

    @staticmethod
    def _form_body(request: HttpRequest) -> bytes:
        """A url-encoded form body (bounded by the limit above), else nothing: multipart and
        JSON bodies are checked by their parsers and serializers."""
        if request.content_type != "application/x-www-form-urlencoded":
            return b""
        return request.body
