"""Webhook secrets encrypted at rest like the other secrets Graylane keeps to use itself
(accounts/secret_fields.py): the column becomes text, the stored values are encrypted with
the first of GRAYLANE_SECRET_KEYS, and the field reads them decrypted. (Was rollouts
0004_encrypt_webhook_secret.)"""

from django.db import migrations, models

import accounts.secret_fields


def encrypt(apps, schema_editor):
    accounts.secret_fields.encrypt_column(apps.get_model("releases", "Webhook"), "secret")


def decrypt(apps, schema_editor):
    accounts.secret_fields.decrypt_column(apps.get_model("releases", "Webhook"), "secret")


class Migration(migrations.Migration):
    replaces = [("rollouts", "0004_encrypt_webhook_secret")]

    dependencies = [
        ("releases", "0003_bundles"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhook",
            name="secret",
            field=models.TextField(blank=True, max_length=200),
        ),
        migrations.RunPython(encrypt, decrypt),
        migrations.AlterField(
            model_name="webhook",
            name="secret",
            field=accounts.secret_fields.EncryptedTextField(blank=True, max_length=200),
        ),
    ]
