"""For the migrations of a model that moves to another app: its content type row moves with
it, so the permissions groups and users hold on it, and the admin log entries about it,
follow (they point at the row). Migrations call these with their historical `apps`, and
depend on CONTENT_TYPE_MIGRATIONS."""

from typing import Any

from django.apps.registry import Apps

CONTENT_TYPE_MIGRATIONS = [
    ("contenttypes", "0002_remove_content_type_name"),
    ("auth", "0012_alter_user_first_name_max_length"),
    ("admin", "0003_logentry_add_action_flag_choices"),
]


def move_content_types(apps: Apps, old_app: str, new_app: str, models: list[str]) -> None:
    """The content types of `models` (lower-case model names) move from `old_app` to
    `new_app`. A new installation has none yet (post_migrate makes them afterwards)."""
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in models:
        old = content_type.objects.filter(app_label=old_app, model=model).first()
        if old is None:
            continue
        early = content_type.objects.filter(app_label=new_app, model=model).first()
        if early is not None:
            _merge(apps, early, into=old)
        old.app_label = new_app
        old.save(update_fields=["app_label"])


def _merge(apps: Apps, early: Any, *, into: Any) -> None:
    """A `migrate` of a single app after the upgrade already made the new app's content type
    (post_migrate makes one for every model in the migrated state): what points at it joins
    the old one, which keeps its id and everything pointing at it."""
    permission = apps.get_model("auth", "Permission")
    for made in permission.objects.filter(content_type=early):
        kept = permission.objects.filter(content_type=into, codename=made.codename).first()
        if kept is None:
            made.content_type = into
            made.save(update_fields=["content_type"])
            continue
        kept.group_set.add(*made.group_set.all())
        kept.user_set.add(*made.user_set.all())
        made.delete()
    apps.get_model("admin", "LogEntry").objects.filter(content_type=early).update(content_type=into)
    early.delete()
