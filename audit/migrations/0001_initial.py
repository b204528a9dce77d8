from django.db import migrations, models


class Migration(migrations.Migration):
    """The audit log moved here from the app then named `releases` (now `policy`): its table
    is taken over as it is (state only), then renamed to this app's name."""

    initial = True

    dependencies = [("policy", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
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
                        ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                        ("actor", models.CharField(db_index=True, max_length=150)),
                        ("source", models.CharField(max_length=20)),
                        ("action", models.CharField(db_index=True, max_length=50)),
                        ("object", models.CharField(max_length=255)),
                        ("before", models.JSONField(blank=True, null=True)),
                        ("after", models.JSONField(blank=True, null=True)),
                    ],
                    options={
                        "verbose_name_plural": "audit entries",
                        "ordering": ["-at", "-id"],
                        "db_table": "releases_auditentry",
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.AlterModelTable(name="auditentry", table=None),
    ]
