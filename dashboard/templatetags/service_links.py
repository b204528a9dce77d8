"""Links to service pages that work for any stored service name."""

from django import template
from django.urls import NoReverseMatch, reverse

register = template.Library()


@register.filter
def service_url(name: str) -> str:
    """The service page of ``name``, or "" where no link can lead there: a name that is
    empty or has a "." or ".." path segment (browsers resolve those away, also escaped).
    Names are checked when they come from a registry (registry_sync/adapters/validation.py);
    this is for names stored before that."""
    if not name or any(part in (".", "..") for part in name.split("/")):
        return ""
    try:
        return reverse("dashboard:service", kwargs={"name": name})
    except NoReverseMatch:
        return ""
