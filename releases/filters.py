"""The releases list's filters, shared by the API and the releases page."""

import django_filters

from releases import states
from releases.models import Release


class ReleaseFilter(django_filters.FilterSet):
    service = django_filters.CharFilter()
    lane = django_filters.CharFilter()
    state = django_filters.ChoiceFilter(choices=[(s, s) for s in states.STATES])

    class Meta:
        model = Release
        fields = ["service", "lane", "state"]
