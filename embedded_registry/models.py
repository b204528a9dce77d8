from django.db import models

MAX_IP_LENGTH = 64


class EmbeddedInstance(models.Model):
    """An instance registered with the embedded registry (the Nacos 1.x naming subset that
    Graylane serves itself). Expiry follows Nacos: unhealthy after the heartbeat timeout,
    gone after the delete timeout, both from the last beat."""

    namespace = models.CharField(max_length=128, default="public")
    group = models.CharField(max_length=128, default="DEFAULT_GROUP")
    service = models.CharField(max_length=255)
    cluster = models.CharField(max_length=64, default="DEFAULT")
    ip = models.CharField(max_length=MAX_IP_LENGTH)
    port = models.PositiveIntegerField()
    weight = models.FloatField(default=1.0)
    healthy = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    ephemeral = models.BooleanField(default=True)
    metadata = models.JSONField(default=dict, blank=True)
    registered_at = models.DateTimeField(auto_now_add=True)
    last_beat = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "group", "service", "cluster", "ip", "port"],
                name="unique_embedded_instance",
            )
        ]
        indexes = [models.Index(fields=["namespace", "group", "service"])]

    def __str__(self) -> str:
        return self.instance_id

    @property
    def instance_id(self) -> str:
        return f"{self.ip}#{self.port}#{self.cluster}#{self.group}@@{self.service}"
