"""A release runs in a lane (default `gray`) and keeps the routing it found when it started;
one release under way per service and lane (two lanes may release one service at once)."""

from django.db import migrations, models

ACTIVE_STATES = ("running", "paused", "insufficient_data")


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0005_renamed_from_rollouts"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="release",
            name="releases_one_active_release_per_service",
        ),
        migrations.AddField(
            model_name="release",
            name="lane",
            field=models.CharField(default="gray", max_length=63),
        ),
        migrations.AddField(
            model_name="release",
            name="routing_before",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="release",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state__in", ACTIVE_STATES)),
                fields=("service", "lane"),
                name="releases_one_active_release_per_service_lane",
            ),
        ),
    ]
