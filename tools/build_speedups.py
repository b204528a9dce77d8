"""Build the engine's C primitives (routing_engine/_speedups.c) in place: `make install`.

Optional: the engine decides the same in pure Python, only slower. A build that fails (no C
compiler, no Python headers) says so in one line and does not fail the install; the
compiler's own output is then shown only with --verbose.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build() -> None:
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


def main() -> int:
    if "--build" in sys.argv:
        build()
        return 0
    # Never an older build beside newer source: built anew, or none.
    for old in ROOT.glob("routing_engine/_speedups*.so"):
        old.unlink()
    result = subprocess.run(
        [sys.executable, __file__, "--build"], cwd=ROOT, capture_output=True, text=True
    )
    if result.returncode:
        output = (result.stderr + result.stdout).strip()
        if "--verbose" in sys.argv:
            print(output, file=sys.stderr)
        last = output.splitlines()[-1] if output else f"exit status {result.returncode}"
        print(f"routing_engine: the C speedups did not build ({last}); the engine runs in pure "
              "Python (the same decisions, slower)", file=sys.stderr)  # fmt: skip
    else:
        print("routing_engine: the C speedups are built (routing_engine/_speedups.c)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
