from django.db import models


class CallEdge(models.Model):
    """The calls one service's version made to another's in one minute, in one lane, as the
    service SDK reports them (dataplane/sdk/call_edges.py): what the bundle checks and the
    service graph read. Written by additive upserts (call_graph/services.py), one row per
    edge and minute however often it is reported, and kept CALL_EDGES_RETENTION_DAYS."""

    caller = models.CharField(max_length=255)
    caller_version = models.CharField(max_length=64)
    callee = models.CharField(max_length=255)
    callee_version = models.CharField(max_length=64)
    lane = models.CharField(
        max_length=63, blank=True, default="", help_text="Empty: PROD and ALL requests."
    )
    minute = models.PositiveBigIntegerField(help_text="Epoch seconds at the minute's start.")
    total = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-minute", "caller", "callee", "caller_version", "callee_version", "lane"]
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "caller", "caller_version", "callee", "callee_version", "lane"],
                name="call_graph_one_edge_per_minute",
            )
        ]
        indexes = [models.Index(fields=["minute"], name="call_graph_edge_minute")]

    def __str__(self) -> str:
        return (
            f"{self.caller} {self.caller_version} -> {self.callee} {self.callee_version} "
            f"@{self.minute}"
        )
