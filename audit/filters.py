"""Which audit entries a reader asked for: one FilterSet for the API and the audit page."""

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField

from audit.models import AuditEntry


class UtcIsoDateTimeField(IsoDateTimeField):
    """ISO 8601 with any offset Python accepts, in UTC: PostgreSQL refuses offsets past
    ±15:59 (found by fuzzing). A time whose UTC falls outside years 1-9999
    (9999-12-31T23:00-05:00) is a bad value, not a server error."""

    def to_python(self, value: str | datetime | None) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError(
                "Out of range: in UTC it must fall within the years 1 to 9999.", code="invalid"
            ) from None


class UtcIsoDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class AuditFilter(filters.FilterSet):
    actor = filters.CharFilter()
    action = filters.CharFilter()
    since = UtcIsoDateTimeFilter(field_name="at", lookup_expr="gte")

    class Meta:
        model = AuditEntry
        fields = ["actor", "action", "since"]


def known_actions() -> list[str]:
    return sorted(set(AuditEntry.objects.order_by().values_list("action", flat=True).distinct()))
