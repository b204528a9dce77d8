from django.db import migrations


class Migration(migrations.Migration):
    """EmbeddedInstance now belongs to the `embedded_registry` app, which took over its
    table."""

    dependencies = [
        ("registry_sync", "0007_encrypt_password"),
        ("embedded_registry", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EmbeddedInstance")],
            database_operations=[],
        ),
    ]
