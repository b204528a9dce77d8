"""What releases tells the live pages: each new revision (after commit), with the fields the
revisions API lists, so charts can mark it on their time axis."""

import events
from releases.models import Revision
from releases.serializers import RevisionSerializer


def on_revision_published(sender, revision: Revision, **kwargs) -> None:
    events.publish(events.RevisionPublished(dict(RevisionSerializer(revision).data)))
