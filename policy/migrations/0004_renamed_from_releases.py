"""The app was named `releases` until it was named for what it holds (the gray policy); the
progressive releases took the name. Its tables and content types take the new name now
(permissions and admin log entries follow the content types); the migrations before this
one replace the old app's, so an existing installation runs only this one."""

from django.db import migrations

from accounts.content_types import CONTENT_TYPE_MIGRATIONS, move_content_types

MODELS = ["policystate", "revision"]


def forwards(apps, schema_editor):
    move_content_types(apps, "releases", "policy", MODELS)
    # The audit log left this app before its content type was moved with it.
    move_content_types(apps, "releases", "audit", ["auditentry"])


def backwards(apps, schema_editor):
    move_content_types(apps, "policy", "releases", MODELS)


class Migration(migrations.Migration):
    dependencies = [("policy", "0003_revision_source_release"), *CONTENT_TYPE_MIGRATIONS]

    operations = [
        migrations.AlterModelTable(name="policystate", table=None),
        migrations.AlterModelTable(name="revision", table=None),
        migrations.RunPython(forwards, backwards),
    ]
