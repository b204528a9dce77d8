"""Registry passwords encrypted at rest (accounts/secret_fields.py): the column becomes text
(the ciphertext is longer than the password), the stored values are encrypted with the
first of GRAYLANE_SECRET_KEYS, and the field reads them decrypted."""

from django.db import migrations, models

import accounts.secret_fields


def encrypt(apps, schema_editor):
    accounts.secret_fields.encrypt_column(apps.get_model("registry_sync", "Registry"), "password")


def decrypt(apps, schema_editor):
    accounts.secret_fields.decrypt_column(apps.get_model("registry_sync", "Registry"), "password")


class Migration(migrations.Migration):
    dependencies = [
        ("registry_sync", "0006_registry_default_version"),
    ]

    operations = [
        migrations.AlterField(
            model_name="registry",
            name="password",
            field=models.TextField(blank=True, max_length=1024),
        ),
        migrations.RunPython(encrypt, decrypt),
        migrations.AlterField(
            model_name="registry",
            name="password",
            field=accounts.secret_fields.EncryptedTextField(blank=True, max_length=1024),
        ),
    ]
