"""What a caller locked out by django-axes (settings: AXES_*) gets: the login page saying
so, or a JSON error under /api/ and /nacos/ (the Nacos login), with 429 either way."""

import math
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

STATUS = 429


def message() -> str:
    minutes = math.ceil(settings.AXES_COOLOFF_TIME.total_seconds() / 60)
    return (
        f"Too many failed sign-ins for this username from your address. Signing in is "
        f"locked for {minutes} minute{'s' if minutes != 1 else ''}; try again later."
    )


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    if request.path.startswith(("/api/", "/nacos/")):
        return JsonResponse({"detail": message()}, status=STATUS)
    context = {
        "form": AuthenticationForm(request),
        "locked_out": message(),
        "next": request.POST.get("next", "") if request.method == "POST" else "",
    }
    return render(request, "registration/login.html", context, status=STATUS)
