"""Functions not fully annotated, per root package, held to a committed baseline.

`make lint` runs it: it fails when a package has more such functions than
untyped_defs_baseline.json allows, and also when it has fewer (then `--lower` writes the
new counts, so the baseline only ever goes down). `--list PACKAGE` prints where they are.

The packages and exclusions are mypy's (`[tool.mypy]` files and exclude in
pyproject.toml), and "fully annotated" is what mypy's disallow_untyped_defs asks: every
argument but a method's self/cls, and the return, except for an `__init__` (or
`__init_subclass__`) with an annotated argument. Plain Python, no project imports.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = Path(__file__).resolve().parent / "untyped_defs_baseline.json"
_INIT_NAMES = {"__init__", "__init_subclass__"}


@dataclass(frozen=True)
class Function:
    path: Path
    line: int
    name: str
    annotated: bool


def _is_annotated(node: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> bool:
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    static = any(
        isinstance(decorator, ast.Name) and decorator.id == "staticmethod"
        for decorator in node.decorator_list
    )
    if in_class and not static and positional:
        positional = positional[1:]  # self or cls: mypy knows its type
    every = [*positional, *arguments.kwonlyargs]
    every += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    if any(arg.annotation is None for arg in every):
        return False
    if node.returns is not None:
        return True
    return node.name in _INIT_NAMES and bool(every)


def _functions(tree: ast.AST, path: Path) -> Iterator[Function]:
    def visit(node: ast.AST, in_class: bool) -> Iterator[Function]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                annotated = _is_annotated(child, in_class)
                yield Function(path, child.lineno, child.name, annotated)
                yield from visit(child, in_class=False)
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, in_class=True)
            else:
                yield from visit(child, in_class=in_class)

    return visit(tree, in_class=False)


def _mypy_scope() -> tuple[list[str], list[re.Pattern[str]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    return list(config["files"]), [re.compile(pattern) for pattern in config.get("exclude", [])]


def functions_by_package() -> dict[str, list[Function]]:
    packages, excludes = _mypy_scope()
    found: dict[str, list[Function]] = {}
    for package in packages:
        found[package] = []
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if any(pattern.search("/" + relative) for pattern in excludes):
                continue
            tree = ast.parse(path.read_text(), filename=relative)
            found[package].extend(_functions(tree, path.relative_to(ROOT)))
    return found


def _report(found: dict[str, list[Function]]) -> dict[str, int]:
    counts = {}
    print(f"{'package':<20}{'functions':>10}{'annotated':>11}{'not':>6}")
    total = annotated = 0
    for package, functions in found.items():
        done = sum(function.annotated for function in functions)
        counts[package] = len(functions) - done
        total += len(functions)
        annotated += done
        share = f"{100 * done / len(functions):.0f} %" if functions else "-"
        print(f"{package:<20}{len(functions):>10}{share:>11}{counts[package]:>6}")
    print(f"{'all':<20}{total:>10}{f'{100 * annotated / total:.0f} %':>11}{total - annotated:>6}")
    return counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lower", action="store_true", help="write the counts that went down")
    parser.add_argument("--list", metavar="PACKAGE", help="print the functions not annotated")
    options = parser.parse_args(argv)
    found = functions_by_package()
    if options.list:
        for function in found[options.list]:
            if not function.annotated:
                print(f"{function.path}:{function.line}: {function.name}")
        return 0
    counts = _report(found)
    baseline: dict[str, int] = json.loads(BASELINE.read_text())
    grew = {p: n for p, n in counts.items() if n > baseline.get(p, 0)}
    shrank = {p: n for p, n in counts.items() if n < baseline.get(p, 0)}
    shrank.update({p: 0 for p in baseline if p not in counts})
    for package, count in grew.items():
        print(
            f"{package}: {count} functions not fully annotated, the baseline allows "
            f"{baseline.get(package, 0)}: annotate the new ones "
            f"(python tools/untyped_defs.py --list {package})"
        )
    if grew:
        return 1
    if shrank and options.lower:
        lowered = {p: n for p, n in {**baseline, **shrank}.items() if n}
        BASELINE.write_text(json.dumps(lowered, indent=2, sort_keys=True) + "\n")
        print(f"baseline lowered: {', '.join(f'{p} {n}' for p, n in sorted(shrank.items()))}")
        return 0
    for package, count in shrank.items():
        print(
            f"{package}: {count} functions not fully annotated, fewer than the baseline's "
            f"{baseline[package]}: lower it (python tools/untyped_defs.py --lower) and commit it"
        )
    return 1 if shrank else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
