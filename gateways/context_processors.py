from django.conf import settings

from gateways.generation import behind_for_longer_than


def gateways_behind(request):
    """`gateways_behind`: how many gateways have been behind the current generation for more
    than GATEWAY_BEHIND_BANNER_SECONDS (base.html shows a banner on every page). Two small
    indexed queries, for signed-in users only."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "gateways_behind": behind_for_longer_than(settings.GATEWAY_BEHIND_BANNER_SECONDS),
        "gateways_behind_seconds": int(settings.GATEWAY_BEHIND_BANNER_SECONDS),
    }
