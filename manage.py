#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graylane.settings")
    import django
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    # A missing or bad setting is the operator's to fix, not a bug: one line, not a traceback.
    try:
        django.setup()
    except ImproperlyConfigured as exc:
        sys.exit(f"manage.py: {exc}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
