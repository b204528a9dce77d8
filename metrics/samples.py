"""One validated sample as the ingestion path passes it around (plain data, no Django)."""

from dataclasses import dataclass

from metrics import latency


@dataclass(frozen=True)
class Sample:
    service: str
    version: str
    ts: int
    total: int
    errors: int
    latency_ms_p95: float | None
    # The lane of the GRAY requests counted (`gray` included); None: PROD and ALL requests.
    # A gateway sends one sample per (service, version, lane) and second.
    lane: str | None = None
    # The requests and errors by the instance that answered them: (address, total, errors),
    # "host:port". Empty from a gateway that does not tell.
    instances: tuple[tuple[str, int, int], ...] = ()

    @property
    def series(self) -> tuple[str, str]:
        """The live series it counts in: lanes are one series (metrics/live.py)."""
        return (self.service, self.version)

    @property
    def bucket(self) -> int | None:
        """The latency bucket this sample's requests weigh in (none without requests)."""
        if self.latency_ms_p95 is None or self.total == 0:
            return None
        return latency.bucket_of(self.latency_ms_p95)


@dataclass
class Figures:
    """Sums over some seconds or minutes of one series."""

    total: int = 0
    errors: int = 0
    histogram: latency.Histogram | None = None

    def add(self, total: int, errors: int, histogram: latency.Histogram) -> None:
        self.total += total
        self.errors += errors
        self.histogram = latency.merge(self.histogram or {}, histogram)

    def success_rate(self) -> float | None:
        if self.total <= 0:
            return None
        return round(100.0 * (self.total - self.errors) / self.total, 4)

    def p95(self) -> float | None:
        return latency.p95(self.histogram or {})
