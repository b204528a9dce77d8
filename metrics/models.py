from django.db import models


class MinuteRollup(models.Model):
    """What all gateways reported for one (service, version, lane) in one minute: the
    history behind the success-rate series (which add a version's lanes up) and the traffic
    split by lane. Live figures come from metrics.live. Written by additive upserts
    (metrics/rollups.py), never read-modify-written."""

    service = models.CharField(max_length=255)
    version = models.CharField(max_length=100)
    # Only a lane of the live document (or `gray`) is stored: metrics.services.ingest counts
    # a sample of another without its lane, so no gateway can make rows of names of its own.
    lane = models.CharField(
        max_length=63, blank=True, default="", help_text="Empty: PROD and ALL requests."
    )
    minute = models.PositiveBigIntegerField(help_text="Epoch seconds at the minute's start.")
    total = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["service", "minute", "version", "lane"],
                name="metrics_one_rollup_per_lane_minute",
            )
        ]
        indexes = [models.Index(fields=["minute"], name="metrics_rollup_minute")]

    def __str__(self) -> str:
        lane = f" lane {self.lane}" if self.lane else ""
        return f"{self.service} {self.version}{lane} @{self.minute}"


class MinuteLatency(models.Model):
    """One latency bucket of a MinuteRollup (metrics/latency.py): the requests of that
    minute whose sample reported a p95 in this bucket. Rows, not a JSON column, so that
    ingestion adds to them in SQL."""

    service = models.CharField(max_length=255)
    version = models.CharField(max_length=100)
    minute = models.PositiveBigIntegerField()
    bucket = models.SmallIntegerField(help_text="Negative below a millisecond.")
    weight = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["service", "minute", "version", "bucket"],
                name="metrics_one_latency_bucket_per_minute",
            )
        ]
        indexes = [models.Index(fields=["minute"], name="metrics_latency_minute")]

    def __str__(self) -> str:
        return f"{self.service} {self.version} @{self.minute} bucket {self.bucket}"
