from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from registry_sync.models import Registry
from registry_sync.sync import SyncFailed, acquire_lease, release_lease, sync_registry


class Command(BaseCommand):
    help = "Sync registries once, in the foreground, with a progress bar and a summary."

    def add_arguments(self, parser):
        parser.add_argument("--registry", help="Only this registry (by name).")

    def handle(self, registry=None, **options):
        registries = Registry.objects.filter(enabled=True)
        if registry:
            registries = Registry.objects.filter(name=registry)
            if not registries.exists():
                raise CommandError(f"No registry named {registry!r}.")
        failed = []
        for reg in registries:
            if not acquire_lease(reg):
                self.stderr.write(f"{reg.name}: a sync is already running; skipped.")
                continue
            bar = tqdm(desc=reg.name, unit="service", file=self.stderr, leave=False)

            def progress(done, total, bar=bar):
                bar.total = total
                bar.n = done
                bar.refresh()

            try:
                summary = sync_registry(reg, progress=progress)
            except SyncFailed as exc:
                failed.append(reg.name)
                self.stderr.write(self.style.ERROR(f"{reg.name}: FAILED, marked stale: {exc}"))
                continue
            finally:
                bar.close()
                release_lease(reg)
            self.stdout.write(self.style.SUCCESS(str(summary)))
        if failed:
            raise CommandError(f"Sync failed for: {', '.join(failed)}")
