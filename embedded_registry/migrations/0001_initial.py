from django.db import migrations, models

from accounts.content_types import CONTENT_TYPE_MIGRATIONS, move_content_types


def forwards(apps, schema_editor):
    move_content_types(apps, "registry_sync", "embedded_registry", ["embeddedinstance"])


def backwards(apps, schema_editor):
    move_content_types(apps, "embedded_registry", "registry_sync", ["embeddedinstance"])


class Migration(migrations.Migration):
    """The embedded registry's table moved here from `registry_sync`: taken over as it is
    (state only), then renamed to this app's name, with its index and content type."""

    initial = True

    dependencies = [("registry_sync", "0007_encrypt_password"), *CONTENT_TYPE_MIGRATIONS]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EmbeddedInstance",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("namespace", models.CharField(default="public", max_length=128)),
                        ("group", models.CharField(default="DEFAULT_GROUP", max_length=128)),
                        ("service", models.CharField(max_length=255)),
                        ("cluster", models.CharField(default="DEFAULT", max_length=64)),
                        ("ip", models.CharField(max_length=64)),
                        ("port", models.PositiveIntegerField()),
                        ("weight", models.FloatField(default=1.0)),
                        ("healthy", models.BooleanField(default=True)),
                        ("enabled", models.BooleanField(default=True)),
                        ("ephemeral", models.BooleanField(default=True)),
                        ("metadata", models.JSONField(blank=True, default=dict)),
                        ("registered_at", models.DateTimeField(auto_now_add=True)),
                        ("last_beat", models.DateTimeField()),
                    ],
                    options={
                        "db_table": "registry_sync_embeddedinstance",
                        "indexes": [
                            models.Index(
                                fields=["namespace", "group", "service"],
                                name="registry_sy_namespa_6e904f_idx",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("namespace", "group", "service", "cluster", "ip", "port"),
                                name="unique_embedded_instance",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="embeddedinstance", table=None),
        migrations.RenameIndex(
            model_name="embeddedinstance",
            new_name="embedded_re_namespa_7ab946_idx",
            old_name="registry_sy_namespa_6e904f_idx",
        ),
        migrations.RunPython(forwards, backwards),
    ]
