"""The one way anything is written to the audit log, from any app."""

from audit.models import AuditEntry


def record(
    *, actor: str, source: str, action: str, object_label: str, before: object, after: object
) -> None:
    """One entry: who (`actor`), through what (`source`: ui, api, sync, registry...), did
    what (`action`, dotted: `instance.offline`) to what (`object_label`), and the parts of it
    before and after (None for a creation or a deletion)."""
    AuditEntry.objects.create(
        actor=actor, source=source, action=action, object=object_label, before=before, after=after
    )
