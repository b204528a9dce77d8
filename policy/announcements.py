"""What the policy app tells the live pages: each new revision (after commit), with the fields the
revisions API lists and its diff, so charts can mark it on their time axis and say what
changed."""

import events
from policy.models import Revision
from policy.serializers import RevisionSerializer


def on_revision_published(sender, revision: Revision, **kwargs) -> None:
    fields = {**RevisionSerializer(revision).data, "diff": revision.diff}
    events.publish_best_effort(events.RevisionPublished(fields))
