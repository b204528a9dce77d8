"""A clock for code that reads its time through a clock parameter (embedded_registry.clock):
it stands still until the test moves it on, so a timeout passes at once, exactly when the
test says, however slow the machine is."""

from datetime import UTC, datetime, timedelta


class SteppedClock:
    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
