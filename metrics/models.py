from django.db import models


class MinuteRollup(models.Model):
    """What all gateways reported for one (service, version) in one minute: the history
    behind the success-rate and latency series. Live figures come from metrics.live."""

    service = models.CharField(max_length=255)
    version = models.CharField(max_length=100)
    minute = models.PositiveBigIntegerField(help_text="Epoch seconds at the minute's start.")
    total = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    latency = models.JSONField(
        default=dict,
        help_text="Requests by latency bucket of their sample's p95 (metrics/latency.py).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["service", "minute", "version"], name="metrics_one_rollup_per_minute"
            )
        ]
        indexes = [models.Index(fields=["minute"], name="metrics_rollup_minute")]

    def __str__(self):
        return f"{self.service} {self.version} @{self.minute}"
