from rest_framework import mixins, viewsets

from audit.filters import AuditFilter
from audit.models import AuditEntry
from audit.serializers import AuditEntrySerializer


class AuditViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """The append-only audit log, newest first."""

    queryset = AuditEntry.objects.order_by("-at", "-id")
    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
