from django.db import migrations


def create_service_role(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    Group.objects.get_or_create(name="service")


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_roles")]
    operations = [migrations.RunPython(create_service_role, migrations.RunPython.noop)]
