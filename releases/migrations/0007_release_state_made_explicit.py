"""Release state made explicit (issue 22): the state the previous code left moves to the new
form, audited.

- A release under way gets lane `gray` (the field's default) and `routing_before`: its
  service's override as the revision before the release's first routing revision had it
  (found by that revision's comment, "Release <id> of <service> <version>: ..."), with a
  leftover of an earlier release put in the new form as below; without such a revision, the
  override's own prod and no routing of its own in the gray lane.
- The previous code ended every release with the service's override at `{"percent": 0,
  "targeted": false}`: nobody reached the gray version of that service any more. Such a
  leftover of a service with no release under way, written by the service's last release
  that ran (its versions match the override's), becomes what the new code leaves: after a
  rollback, `to_version` quarantined and the override's percent and targeted cleared; after
  an abort or a failure, percent and targeted cleared; after a promotion, `{"prod":
  to_version}` alone. A `{"percent": 0, "targeted": false}` that no release wrote is an
  operator's and stays.

A changed document is a new revision (source `release`, author `migration`) and the live
state; the gateways' periodic sweep makes its generation. Every change has an audit entry.
Backwards it changes nothing: the fields go away with 0006 reversed.
"""

import json

from django.db import migrations
from django.utils import timezone

from routing_engine import canonical_json, checksum, diff_documents

ACTIVE = ("running", "paused", "insufficient_data")
ACTOR = "migration"
SOURCE = "migration"
GRAY_MEMBER_KEYS = ("gray", "percent", "targeted")


def _is_leftover(override):
    return override.get("percent") == 0 and override.get("targeted") is False


def _writer(apps, service, override, versions, before_pk=None):
    """The release whose end wrote the leftover `override`, or None: the service's last
    release that ran and finished (before release `before_pk`), if its versions match."""
    Release = apps.get_model("releases", "Release")
    ran = Release.objects.filter(
        service=service,
        state__in=("promoted", "rolled_back", "aborted", "failed"),
        events__kind="started",
    )
    if before_pk is not None:
        ran = ran.filter(pk__lt=before_pk)
    last = ran.order_by("-updated_at", "-pk").first()
    if last is None:
        return None
    found = (override.get("prod") or versions["prod"], override.get("gray") or versions["gray"])
    if last.state == "promoted":
        wrote = (last.to_version, last.from_version)
    else:
        wrote = (last.from_version, last.to_version)
    return last if found == wrote else None


def _new_form(override, writer):
    """The override the new code leaves after `writer` ended."""
    if writer.state == "promoted":
        kept = {key: value for key, value in override.items() if key not in GRAY_MEMBER_KEYS}
        return {**kept, "prod": writer.to_version}
    return {key: value for key, value in override.items() if key not in ("percent", "targeted")}


def _routing_before(apps, release, document):
    Revision = apps.get_model("policy", "Revision")
    prefix = f"Release {release.pk} of {release.service} {release.to_version}: "
    first = (
        Revision.objects.filter(source="release", comment__startswith=prefix)
        .order_by("number")
        .first()
    )
    previous = None if first is None else Revision.objects.filter(number=first.number - 1).first()
    if previous is None:
        override = document["services"].get(release.service, {}) if document else {}
        return {"prod": override.get("prod"), "member": {}}
    found = json.loads(previous.content)
    override = found["services"].get(release.service, {})
    if _is_leftover(override):
        writer = _writer(apps, release.service, override, found["versions"], release.pk)
        if writer is not None:
            override = _new_form(override, writer)
    member = {key: override[key] for key in GRAY_MEMBER_KEYS if key in override}
    return {"prod": override.get("prod"), "member": member}


def forwards(apps, schema_editor):
    Release = apps.get_model("releases", "Release")
    PolicyState = apps.get_model("policy", "PolicyState")
    Revision = apps.get_model("policy", "Revision")
    AuditEntry = apps.get_model("audit", "AuditEntry")
    state = PolicyState.objects.filter(pk=1).first()
    document = None if state is None else json.loads(state.content)

    under_way = Release.objects.filter(state__in=ACTIVE)
    for release in under_way.filter(routing_before__isnull=True).order_by("pk"):
        release.routing_before = _routing_before(apps, release, document)
        release.save(update_fields=["routing_before"])
        AuditEntry.objects.create(
            actor=ACTOR,
            source=SOURCE,
            action="release.migrate",
            object=f"release {release.pk} ({release.service} {release.to_version})",
            before=None,
            after={"lane": release.lane, "routing_before": release.routing_before},
        )

    if document is None:
        return
    busy = set(under_way.values_list("service", flat=True))
    services = dict(document["services"])
    quarantined = {
        name: list(versions) for name, versions in document.get("quarantined", {}).items()
    }
    audits = []
    for name, override in sorted(document["services"].items()):
        if name in busy or not _is_leftover(override):
            continue
        writer = _writer(apps, name, override, document["versions"])
        if writer is None:
            continue
        services[name] = _new_form(override, writer)
        after = {"override": services[name]}
        if writer.state == "rolled_back":
            quarantined[name] = sorted({*quarantined.get(name, []), writer.to_version})
            after["quarantined"] = quarantined[name]
        action = "service.quarantine" if writer.state == "rolled_back" else "service.versions"
        audits.append((name, action, {"override": override}, after, writer))
    if not audits:
        return

    changed = {**document, "services": services}
    if any(quarantined.values()):
        changed["quarantined"] = {name: v for name, v in sorted(quarantined.items()) if v}
    content = canonical_json(changed)
    number = state.revision + 1
    comment = "Release state made explicit: " + "; ".join(
        f"{name} after release {writer.pk} ({writer.state})" for name, _, _, _, writer in audits
    )
    Revision.objects.create(
        number=number,
        content=content,
        checksum=checksum(changed),
        diff=diff_documents(document, changed),
        author=ACTOR,
        source="release",
        comment=comment[:500],
    )
    state.revision = number
    state.content = content
    state.updated_at = timezone.now()
    state.updated_by = ACTOR
    state.save()
    for name, action, before, after, writer in audits:
        AuditEntry.objects.create(
            actor=ACTOR,
            source=SOURCE,
            action=action,
            object=f"service {name}",
            before={"revision": number - 1, **before},
            after={"revision": number, **after, "release": writer.pk},
        )


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0006_release_lane"),
        ("policy", "0004_renamed_from_releases"),
        ("audit", "0001_initial"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
