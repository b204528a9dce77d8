"""Build what makes the data plane fast, both optional (`make install`):

* the engine's C primitives (routing_engine/_speedups.c), in place;
* the gateway's request path compiled by mypyc into build/gateway/, with the hash of every
  source it was built from (dataplane/gateway/compiled.py uses it only while they match).

Either decides the same as the pure Python it replaces, only faster. A build that fails (no
C compiler, no Python headers, no mypyc) says so in one line and does not fail the install;
the compiler's own output is then shown only with --verbose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# What is being rebuilt is not loaded here, nor warned about as out of date.
os.environ["GRAYLANE_PURE_PYTHON_GATEWAY"] = "true"

from dataplane.gateway import compiled  # noqa: E402  (the repository on the path first)


def build_engine() -> None:
    from setuptools import Extension, setup

    with tempfile.TemporaryDirectory() as temp:
        setup(
            name="graylane-speedups",
            packages=[],
            ext_modules=[Extension("routing_engine._speedups", ["routing_engine/_speedups.c"],
                                   extra_compile_args=["-O2"])],
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", temp,
                         "--build-lib", temp],
        )  # fmt: skip


def build_gateway() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    sources = compiled.fingerprint()
    paths = [f"dataplane/gateway/{name}.py" for name in compiled.MODULES]
    with tempfile.TemporaryDirectory() as temp:
        out = Path(temp) / "out"
        # The project's mypy configuration loads the Django plugins, which these modules
        # (no Django import) do not need: the compiler reads none, only these options.
        config = Path(temp) / "mypy.ini"
        config.write_text("[mypy]\n")
        extensions = mypycify(
            ["--config-file", str(config), "--ignore-missing-imports", "--check-untyped-defs",
             *paths],
            group_name="graylane_gateway", target_dir=str(Path(temp) / "c"),
        )  # fmt: skip
        setup(
            name="graylane-gateway-compiled",
            packages=[],
            ext_modules=extensions,
            script_args=["--quiet", "build_ext", "--build-temp", str(Path(temp) / "o"),
                         "--build-lib", str(out)],
        )  # fmt: skip
        if compiled.fingerprint() != sources:
            raise SystemExit("the sources changed while they were compiled; run it again")
        (out / compiled.MANIFEST).write_text(json.dumps(sources, indent=1, sort_keys=True))
        shutil.rmtree(compiled.BUILD, ignore_errors=True)
        compiled.BUILD.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(out, compiled.BUILD)


def _run(stage: str) -> str | None:
    """The stage built in a process of its own: None, or the last line of why not."""
    result = subprocess.run(
        [sys.executable, __file__, stage], cwd=ROOT, capture_output=True, text=True
    )
    if not result.returncode:
        return None
    output = (result.stderr + result.stdout).strip()
    if "--verbose" in sys.argv:
        print(output, file=sys.stderr)
    return output.splitlines()[-1] if output else f"exit status {result.returncode}"


def main() -> int:
    if "--engine" in sys.argv:
        build_engine()
        return 0
    if "--gateway" in sys.argv:
        build_gateway()
        return 0
    # Never an older build beside newer source: built anew, or none.
    for old in ROOT.glob("routing_engine/_speedups*.so"):
        old.unlink()
    shutil.rmtree(compiled.BUILD, ignore_errors=True)
    failed = _run("--engine")
    if failed:
        print(f"routing_engine: the C speedups did not build ({failed}); the engine runs in pure "
              "Python (the same decisions, slower)", file=sys.stderr)  # fmt: skip
    else:
        print("routing_engine: the C speedups are built (routing_engine/_speedups.c)")
    failed = _run("--gateway")
    if failed:
        print(f"dataplane.gateway: the request path did not compile ({failed}); the gateway "
              "runs as Python (the same answers, slower)", file=sys.stderr)  # fmt: skip
    else:
        print(f"dataplane.gateway: the request path is compiled by mypyc ({compiled.BUILD})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
