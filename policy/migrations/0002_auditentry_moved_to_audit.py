from django.db import migrations


class Migration(migrations.Migration):
    """AuditEntry now belongs to the `audit` app, which took over its table. (Was releases
    0002_auditentry_moved_to_audit.)"""

    replaces = [("releases", "0002_auditentry_moved_to_audit")]

    dependencies = [("policy", "0001_initial"), ("audit", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditEntry")],
            database_operations=[],
        ),
    ]
