"""An instance of dataplane/sdk/tests/cold_app.py (slow on the first request of each path)
configured from the environment as a deployment configures the SDK, for the replay warm-up
test and bench/warmup.py."""

from __future__ import annotations

import sys

import httpx

from testing.processes import Process, django_env, free_port

SERVICE = "svc"


class ColdInstance(Process):
    """Registers in `registry` once warm; `warmup` holds the GRAYLANE_WARMUP_* settings
    (without the prefix: `PATHS`, `SAMPLES`, `SUCCESSES`)."""

    def __init__(
        self,
        registry: str,
        *,
        dashboard: str = "",
        token: str = "",
        build_ms: float = 50.0,
        **warmup: str,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{SERVICE}"
        env = django_env(
            "",
            GRAYLANE_SERVICE=SERVICE,
            GRAYLANE_VERSION="V1",
            GRAYLANE_PORT=str(self.port),
            GRAYLANE_REGISTRY_URL=registry,
            GRAYLANE_DASHBOARD_URL=dashboard,
            GRAYLANE_LIFECYCLE_TOKEN=token,
            **{f"GRAYLANE_WARMUP_{name}": value for name, value in warmup.items()},
        )
        args = [sys.executable, "-m", "dataplane.sdk.tests.cold_app", "--build-ms", str(build_ms)]
        super().__init__(args, env)

    def is_ready(self) -> bool:
        try:
            return httpx.get(self.url + "/-/seen", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def warmup_requests(self) -> list[tuple[str, str, str | None]]:
        """(method, path, user) of each warm-up request it had, in order."""
        seen = httpx.get(self.url + "/-/seen", timeout=2).json()
        return [(r["method"], r["path"], r["user"]) for r in seen if r["warmup"]]
