"""Approval steps: a release that reaches a step `{"approval": true}` waits in
`awaiting_approval` (its routing that of the step before, none at all when it is the first;
not analysed, no deadline) until an operator approves it (releases/services.py). With
RELEASE_FOUR_EYES the operator must be another than the release's creator."""

from django.conf import settings

from releases.models import Release


def waiting_reason(release: Release) -> str:
    """What the timeline says the release waits for."""
    who = "an operator"
    if settings.RELEASE_FOUR_EYES and release.created_by:
        who += f" other than {release.created_by}"
    return f"step {release.step + 1} waits for the approval of {who}"


def refusal(release: Release, actor: str) -> str | None:
    """Why `actor` may not approve the release, or None."""
    if settings.RELEASE_FOUR_EYES and actor == release.created_by:
        return (
            f"Four eyes (RELEASE_FOUR_EYES): {actor} created release {release.pk} and may not "
            "approve it; another operator must."
        )
    return None
