"""Freeze windows on the releases page: an admin makes one, or ends one (removes it if it
has not begun), through the use cases and validation of `/api/v1/freezes/`."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from accounts.decorators import role_required
from accounts.roles import ADMIN
from policy.freezes import AlreadyOver, create_freeze, end_freeze
from policy.models import Freeze
from policy.serializers import FreezeSerializer

from .forms import BundleForm, FreezeForm, ReleaseForm
from .release_views import releases_page


@require_POST
@role_required(ADMIN)
def freeze_create(request: HttpRequest) -> HttpResponse:
    form = FreezeForm(request.POST)
    body = FreezeSerializer(data=form.api_body())
    if not form.api_check(body):
        return releases_page(request, ReleaseForm(), BundleForm(), 400, freeze_form=form)
    freeze = create_freeze(**body.validated_data, actor=request.user.username, source="ui")
    messages.success(request, f"Freeze window {freeze.pk} made: {freeze}.")
    return redirect("dashboard:releases")


@require_POST
@role_required(ADMIN)
def freeze_end(request: HttpRequest, pk: int) -> HttpResponse:
    freeze = get_object_or_404(Freeze, pk=pk)
    try:
        ended = end_freeze(freeze.pk, actor=request.user.username, source="ui")
    except AlreadyOver as exc:
        messages.error(request, str(exc))
    else:
        done = "ended now" if ended else "removed (it had not begun)"
        messages.success(request, f"Freeze window {freeze.pk} {done}.")
    return redirect("dashboard:releases")
