"""Push secrets and Nacos passwords encrypted at rest (accounts/secret_fields.py): the
columns become text (the ciphertext is longer than the secret), the stored values are
encrypted with the first of GRAYLANE_SECRET_KEYS, and the fields read them decrypted."""

from django.db import migrations, models

import accounts.secret_fields


def encrypt(apps, schema_editor):
    gateway = apps.get_model("gateways", "Gateway")
    for name in ("push_secret", "nacos_password"):
        accounts.secret_fields.encrypt_column(gateway, name)


def decrypt(apps, schema_editor):
    gateway = apps.get_model("gateways", "Gateway")
    for name in ("push_secret", "nacos_password"):
        accounts.secret_fields.decrypt_column(gateway, name)


class Migration(migrations.Migration):
    dependencies = [
        ("gateways", "0004_gateway_fronts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="gateway",
            name="nacos_password",
            field=models.TextField(blank=True, max_length=1024),
        ),
        migrations.AlterField(
            model_name="gateway",
            name="push_secret",
            field=models.TextField(editable=False, max_length=64),
        ),
        migrations.RunPython(encrypt, decrypt),
        migrations.AlterField(
            model_name="gateway",
            name="nacos_password",
            field=accounts.secret_fields.EncryptedTextField(blank=True, max_length=1024),
        ),
        migrations.AlterField(
            model_name="gateway",
            name="push_secret",
            field=accounts.secret_fields.EncryptedTextField(editable=False, max_length=64),
        ),
    ]
