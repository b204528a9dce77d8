"""The gateway's hot path compiled by mypyc (tools/build_speedups.py, run by `make install`),
used in place of its Python source only when it was built from exactly this source.

The build lives outside the source tree, in build/gateway/: the compiled modules under
dataplane/gateway/, their shared library beside, and sources.json, the hash of every source
the compiler read types from (the gateway's and the engine's). It is put in front of the
package's path, so `import dataplane.gateway.proxy` loads the compiled module; the modules
not compiled are found in the source tree as before. A source edited since the build makes
the whole gateway run as Python (one warning says which file), never an older build beside
newer source. GRAYLANE_PURE_PYTHON_GATEWAY=true runs the Python source: the fallback, which
decides the same (the tests run both).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = ROOT / "build" / "gateway"
MANIFEST = "sources.json"
# The request's path through the gateway, in the order they import one another.
MODULES = ("headers", "replay", "sampling", "metrics", "shadow", "routing", "upstream", "proxy")
# Whose types the compiled code was built against: a change to any of them may change what
# the compiled code assumes of the objects it is handed.
SOURCE_DIRECTORIES = ("dataplane/gateway", "routing_engine")
PURE_ENVIRONMENT = "GRAYLANE_PURE_PYTHON_GATEWAY"


def fingerprint(root: Path = ROOT) -> dict[str, str]:
    """{source path relative to root: sha256 of its bytes} of every module the build read."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for directory in SOURCE_DIRECTORIES
        for path in sorted((root / directory).glob("*.py"))
    }


def changed_since_build(build: Path = BUILD, root: Path = ROOT) -> list[str] | None:
    """The sources that differ from those the build was made of ([] when none), or None when
    there is no build."""
    try:
        built = json.loads((build / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    now = fingerprint(root)
    return sorted(path for path in built.keys() | now.keys() if built.get(path) != now.get(path))


def _pure_requested() -> bool:
    return os.environ.get(PURE_ENVIRONMENT, "").lower() not in ("", "0", "false")


def why_not_compiled(build: Path = BUILD, root: Path = ROOT) -> str | None:
    """None when the compiled modules can be used, else why the gateway runs as Python."""
    if _pure_requested():
        return f"{PURE_ENVIRONMENT} is set"
    changed = changed_since_build(build, root)
    if changed is None:
        return "not built here (make install builds it)"
    if changed:
        return f"built from other sources ({', '.join(changed[:3])} changed; make install)"
    return None


def activate(package_path: list[str]) -> str | None:
    """Make the package load the compiled modules where they can be used; returns why not."""
    reason = why_not_compiled()
    if reason is None:
        package_path.insert(0, str(BUILD / "dataplane" / "gateway"))
        # The modules' shared library is a top-level module of the build.
        sys.path.append(str(BUILD))
    elif not reason.startswith(("not built", PURE_ENVIRONMENT)):
        warnings.warn(f"dataplane.gateway runs as Python: the compiled build is {reason}",
                      RuntimeWarning, stacklevel=2)  # fmt: skip
    return reason


def in_use() -> bool:
    """Whether the request's path loaded from the compiled build in this process."""
    from dataplane.gateway import proxy

    return not (proxy.__file__ or "").endswith(".py")
