from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Snapshot:
    """One generation of the gateway document, as served and pushed."""

    number: int
    created_at: datetime  # with the number, tells generations apart across a database reset
    body: bytes  # the document exactly as served and pushed
