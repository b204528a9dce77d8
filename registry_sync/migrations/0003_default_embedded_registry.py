from django.db import migrations


def create_embedded(apps, schema_editor):
    Registry = apps.get_model("registry_sync", "Registry")
    if not Registry.objects.exists():
        Registry.objects.create(name="embedded", kind="embedded")


class Migration(migrations.Migration):
    dependencies = [("registry_sync", "0002_embedded_and_sync_fields")]
    operations = [migrations.RunPython(create_embedded, migrations.RunPython.noop)]
