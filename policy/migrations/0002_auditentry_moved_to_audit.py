from django.db import migrations


class Migration(migrations.Migration):
    """AuditEntry now belongs to the `audit` app, which took over its table."""

    dependencies = [("releases", "0001_initial"), ("audit", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditEntry")],
            database_operations=[],
        ),
    ]
