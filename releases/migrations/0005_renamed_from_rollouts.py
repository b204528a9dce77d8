"""The app was named `rollouts` until it took the name of what it holds (progressive
releases) from the app now named `policy`. Its tables, index and constraint names and
content types take the new name now (permissions and admin log entries follow the content
types), after the policy app's have left the name."""

from django.db import migrations, models

from accounts.content_types import CONTENT_TYPE_MIGRATIONS, move_content_types

MODELS = ["release", "releaseevent", "releasebundle", "webhook", "webhookdelivery"]
ACTIVE_STATES = ("running", "paused", "insufficient_data")


def forwards(apps, schema_editor):
    move_content_types(apps, "rollouts", "releases", MODELS)


def backwards(apps, schema_editor):
    move_content_types(apps, "releases", "rollouts", MODELS)


class Migration(migrations.Migration):
    dependencies = [
        ("releases", "0004_encrypt_webhook_secret"),
        ("policy", "0004_renamed_from_releases"),
        *CONTENT_TYPE_MIGRATIONS,
    ]

    operations = [
        *(migrations.AlterModelTable(name=model, table=None) for model in MODELS),
        migrations.RenameIndex(
            model_name="releaseevent",
            new_name="releases_event_timeline",
            old_name="rollouts_event_timeline",
        ),
        migrations.RemoveConstraint(
            model_name="release", name="rollouts_one_active_release_per_service"
        ),
        migrations.AddConstraint(
            model_name="release",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state__in", ACTIVE_STATES)),
                fields=("service",),
                name="releases_one_active_release_per_service",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
