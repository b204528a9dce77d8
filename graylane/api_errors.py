"""One error shape for the whole API: DRF's `{"field": ["message"]}`, and `{"detail": ...}`
for everything that is not about a field."""

from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, list):
        response.data = {"non_field_errors": response.data}
    return response
