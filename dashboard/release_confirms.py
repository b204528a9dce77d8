"""What the release and bundle pages ask before an action that moves traffic at once, as
taking an instance offline and rolling a revision back ask (the forms' data-confirm,
static/js/app.js). On a release, pause, resume and approve only hold or let the analysis go
on: they do not ask. On a bundle, approve asks too: it lets several services' releases move
on at once."""

from releases.models import Release, ReleaseBundle


def confirmations(release: Release) -> dict[str, str]:
    """The question asked before each action of `release`, by action name."""
    return _questions(
        f"release {release.id} ({release.service} {release.to_version})", release.to_version
    )


def bundle_confirmations(bundle: ReleaseBundle, members: list[Release]) -> dict[str, str]:
    """The question asked before each action of `bundle` (its releases `members`)."""
    versions = ", ".join(f"{member.service} {member.to_version}" for member in members)
    what = f"bundle {bundle.pk} ({bundle.name}: {versions})"
    return {
        **_questions(what, "the new versions"),
        "approve": f"Approve {what}? Its releases waiting for approval go on to their next step.",
    }


def _questions(what: str, new: str) -> dict[str, str]:
    return {
        "start": f"Start {what}? Its first step's traffic goes to {new} at once.",
        "promote": f"Promote {what}? All of its traffic goes to {new}.",
        "rollback": (
            f"Roll back {what}? Its routing goes back to what it was before it started, "
            f"and the quarantine of {new} holds until an operator lifts it."
        ),
        "abort": f"Abort {what}? Its routing goes back to what it was before it started.",
    }
