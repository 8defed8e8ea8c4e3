"""One way to run every benchmark: ``python -m bench <name> [args...]`` from the repo root.

``python -m bench list`` (or no name) prints each benchmark with the first line of its
docstring. ``python -m bench <name> [args...]`` runs ``bench/bench_<name>.py`` as a
script with those arguments, as ``python bench/bench_<name>.py [args...]`` would:

- ``sys.argv[0]`` is the script's path and ``__name__`` is ``"__main__"``;
- ``sys.path`` starts with ``bench/`` (so ``from people import ...`` and
  ``from _pg import ...`` work), and the repo root, which ``-m`` puts first, moves to
  the end: a peer checkout on ``PYTHONPATH`` (``PYTHONPATH=<checkout> python -m bench
  cluster one ...``) is the ``er`` the script imports, as it is for the plain script.

An unknown name is one line on stderr and exit status 2. ``<name> --help`` of a script
without an argument parser prints its docstring instead of starting the benchmark.
"""

from __future__ import annotations

import ast
import os
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def benchmarks() -> dict[str, Path]:
    """Benchmark name -> script, sorted by name."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py"))}


def _docstring(path: Path) -> str:
    return (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").strip()


def _summary(path: Path) -> str:
    doc = _docstring(path)
    return doc.splitlines()[0] if doc else ""


def _list(found: dict[str, Path]) -> None:
    width = max(map(len, found))
    for name, path in found.items():
        print(f"{name:<{width}}  {_summary(path)}")
    print("\nrun one: python -m bench <name> [args...]  (<name> --help for its options)")


def _script_path() -> list[str]:
    """``sys.path`` as ``python bench/bench_x.py`` has it: bench/ first, no repo root
    ahead of ``PYTHONPATH`` (kept last, for an ``er`` that is not installed)."""

    def is_root(entry: str) -> bool:
        return os.path.realpath(entry or os.curdir) == str(ROOT)

    rest = [p for p in sys.path if not is_root(p) and os.path.realpath(p or ".") != str(HERE)]
    return [str(HERE), *rest, str(ROOT)]


def main(argv: list[str]) -> int:
    found = benchmarks()
    if not argv or argv[0] in ("list", "-h", "--help"):
        _list(found)
        return 0
    name, rest = argv[0].replace("-", "_"), argv[1:]
    if name not in found:
        sys.stderr.write(f"python -m bench: no benchmark {argv[0]!r} (known: {', '.join(found)})\n")
        return 2
    script = found[name]
    if ("-h" in rest or "--help" in rest) and "argparse" not in script.read_text("utf-8"):
        print(f"usage: python -m bench {name}\n\n{_docstring(script)}")
        return 0
    sys.argv = [str(script), *rest]
    sys.path[:] = _script_path()
    runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
