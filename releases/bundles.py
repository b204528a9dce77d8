"""Release bundles: several services released as one. Each member is an ordinary release
(its own routing, analysis and events); the bundle starts, pauses, resumes and promotes
them in dependency order (a service before those that call it: releases/bundle_order.py)
and rolls them back (or aborts them) in the reverse order, all or nothing. The analysis
advances a bundle only when every member is healthy at the step, and one member's rollback
or failure takes the others back to prod (releases/services.py)."""

from django.db import transaction

from releases import services, states
from releases.bundle_order import OrderProblem, dependency_order
from releases.models import Release, ReleaseBundle

REVERSED_ACTIONS = ("rollback", "abort")


def create_bundle(
    *,
    name: str,
    members: list[dict],
    steps: list[dict],
    analysis_settings: dict,
    actor: str,
    source: str,
) -> ReleaseBundle:
    """`members`: `{"service", "to_version", "from_version"?, "depends_on"?}`, released in
    dependency order (bundle_order.py). Raises services.Invalid."""
    names = [member["service"] for member in members]
    if len(members) < 2:
        raise services.Invalid({"releases": ["A bundle holds at least two services."]})
    if len(set(names)) != len(names):
        raise services.Invalid({"releases": ["Each service at most once."]})
    try:
        members = dependency_order(members)
    except OrderProblem as exc:
        raise services.Invalid({"releases": exc.messages}) from None
    with transaction.atomic():
        bundle = ReleaseBundle.objects.create(name=name, created_by=actor)
        for position, member in enumerate(members):
            try:
                release = services.create_release(
                    service=member["service"],
                    to_version=member["to_version"],
                    from_version=member.get("from_version"),
                    steps=steps,
                    analysis_settings=analysis_settings,
                    actor=actor,
                    source=source,
                    bundle=bundle,
                    position=position,
                )
            except services.Invalid as exc:
                transaction.set_rollback(True)
                raise services.Invalid(
                    {
                        "releases": [
                            f"{member['service']}: {field}: {' '.join(msgs)}"
                            for field, msgs in exc.errors.items()
                        ]
                    }
                ) from None
            if member.get("depends_on"):
                release.depends_on = sorted(set(member["depends_on"]))
                release.save(update_fields=["depends_on"])
    return bundle


def act_bundle(bundle_id: int, action: str, *, actor: str, source: str) -> ReleaseBundle:
    """The action on every member not finished yet, in (reverse) dependency order; if any
    member's state forbids it, services.Conflict and nothing changes."""
    with transaction.atomic():
        bundle = ReleaseBundle.objects.get(pk=bundle_id)
        members = list(Release.objects.select_for_update().filter(bundle=bundle).order_by("pk"))
        members.sort(key=lambda r: r.position, reverse=action in REVERSED_ACTIONS)
        live = [m for m in members if m.state not in states.FINISHED]
        if action not in states.bundle_allowed_actions([m.state for m in members]):
            refused = [m for m in live if m.state not in states.ACTIONS[action]]
            blocking = ", ".join(f"{m.service} is {m.state}" for m in refused or members)
            raise services.Conflict(f"The bundle cannot {action}: {blocking}.")
        for member in live:
            services.act(member.pk, action, actor=actor, source=source)
    return bundle
