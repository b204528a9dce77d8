"""What the policy app tells the live pages: each new revision (after commit), with the fields the
revisions API lists and its diff, so charts can mark it on their time axis and say what
changed."""

from typing import Any, cast

import events
from policy.models import Revision
from policy.serializers import RevisionSerializer


def on_revision_published(sender: object, revision: Revision, **kwargs: Any) -> None:
    fields = cast(events.RevisionFields, dict(RevisionSerializer(revision).data))
    events.publish_best_effort(events.RevisionPublished(revision=fields, diff=revision.diff))
