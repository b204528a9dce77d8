"""What the release page asks before an action that moves traffic at once, as taking an
instance offline and rolling a revision back ask (the forms' data-confirm, static/js/app.js).
Pause, resume and approve only hold or let the analysis go on: they do not ask."""

from releases.models import Release


def confirmations(release: Release) -> dict[str, str]:
    """The question asked before each action, by action name."""
    what = f"release {release.id} ({release.service} {release.to_version})"
    return {
        "start": f"Start {what}? Its first step's traffic goes to {release.to_version} at once.",
        "promote": f"Promote {what}? All of its traffic goes to {release.to_version}.",
        "rollback": (
            f"Roll back {what}? Its routing goes back to what it was before it started, "
            f"and {release.to_version} is quarantined until an operator lifts it."
        ),
        "abort": f"Abort {what}? Its routing goes back to what it was before it started.",
    }
