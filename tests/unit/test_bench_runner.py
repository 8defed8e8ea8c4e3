"""``python -m bench``: one way to run every benchmark; bench/RESULTS.md says how each
table was made (command, date, machine, peer) and cites every raw file kept."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
NAMES = sorted(p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py"))
RESULTS = (BENCH / "RESULTS.md").read_text(encoding="utf-8")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120
    )


def _runner() -> ModuleType:  # bench/__main__.py as a module, without running it
    spec = importlib.util.spec_from_file_location("bench_runner", BENCH / "__main__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the runner --------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("list",), ()])
def test_list_names_every_benchmark_with_its_summary(args: tuple[str, ...]) -> None:
    out = _run("-m", "bench", *args)
    assert out.returncode == 0, out.stderr
    rows = [line.split(None, 1) for line in out.stdout.splitlines()[: len(NAMES)]]
    assert [r[0] for r in rows] == NAMES
    assert all(len(r) == 2 and r[1].strip() for r in rows)  # the docstring's first line


def test_an_unknown_name_is_one_line_and_exit_2() -> None:
    out = _run("-m", "bench", "nosuch")
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "nosuch" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("name", NAMES)
def test_every_benchmark_answers_help_both_ways(name: str) -> None:
    for args in (("-m", "bench", name, "--help"), (f"bench/bench_{name}.py", "--help")):
        out = _run(*args)
        assert out.returncode == 0, (args, out.stderr[-800:])
        assert "usage" in out.stdout.lower(), args


def _imports_er_at_top(path: Path) -> bool:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "er" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "er":
            return True
    return False


def test_a_peer_checkout_on_pythonpath_is_the_er_the_script_imports(tmp_path: Path) -> None:
    """As for ``python bench/bench_x.py``: ``PYTHONPATH=<checkout> python -m bench x``
    measures the checkout's ``er``, not the repository's (which ``-m`` puts first)."""
    name = next((n for n in NAMES if _imports_er_at_top(BENCH / f"bench_{n}.py")), None)
    if name is None:
        pytest.skip("no benchmark imports er at module level")
    (tmp_path / "er").mkdir()
    (tmp_path / "er" / "__init__.py").write_text('print("PEER-ER")\nraise SystemExit(0)\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for args in (("-m", "bench", name, "--help"), (f"bench/bench_{name}.py", "--help")):
        out = _run(*args, env=env)
        assert out.returncode == 0 and out.stdout.startswith("PEER-ER"), (args, out.stderr)


def test_help_of_a_script_without_argparse_shows_its_docstring_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = tmp_path / "ran"
    script = tmp_path / "bench_plain.py"
    script.write_text(f'"""A plain benchmark.\n\nMore."""\nopen({str(ran)!r}, "w").close()\n')
    runner = _runner()
    monkeypatch.setattr(runner, "benchmarks", lambda: {"plain": script})
    assert runner.main(["plain", "--help"]) == 0
    assert "A plain benchmark." in capsys.readouterr().out and not ran.exists()
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert runner.main(["plain"]) == 0 and ran.exists()  # without --help it runs


# -- RESULTS.md ----------------------------------------------------------------------------

TABLE = re.compile(r"^\|.*\|\n\|[-| :]+\|\n(?:\|.*\|\n?)*", re.M)
COMMAND = re.compile(r"Command:\s+`(python -m bench\s+\w+|ER_DATA_DIR=[^`]*? er \w+)")
DATE = re.compile(r"Date:\s+[^.]*?20\d\d-\d\d-\d\d")


def _sections() -> dict[str, str]:
    parts = re.split(r"^## ", RESULTS, flags=re.M)[1:]
    return {p.splitlines()[0]: p for p in parts}


def _says_how(text: str) -> list[str]:
    """What a table's preamble lacks of: command, date, machine, peer."""
    need = {"command": COMMAND, "date": DATE, "machine": re.compile(r"Machine:\s+\S")}
    lacking = [k for k, rx in need.items() if not rx.search(text)]
    if not re.search(r"Peers?( \([^)]*\))?:\s+\S", text):
        lacking.append("peer")
    return lacking


def test_every_table_names_its_command_date_machine_and_peer() -> None:
    sections = _sections()
    assert len(sections) >= 15
    for title, body in sections.items():
        tables = list(TABLE.finditer(body))
        if not tables:
            continue
        head = body[: tables[0].start()]
        assert _says_how(head) == [], f"section {title!r} lacks {_says_how(head)}"
        assert len(re.findall(r"^- Last changed by: \S", head, flags=re.M)) == 1, title
        for before, table in itertools.pairwise(tables):
            between = body[before.end() : table.start()]
            if between.strip().startswith("Same run"):
                continue
            lacking = _says_how(between)
            assert lacking == [], f"a table of {title!r} lacks {lacking}"


def test_every_command_is_python_m_bench_with_a_known_name() -> None:
    assert "python bench/" not in RESULTS and "bench/bench_" not in RESULTS
    names = re.findall(r"python -m bench\s+(\w+)", RESULTS)
    assert names and set(names) <= {*NAMES, "list"}, set(names) - set(NAMES)


def test_results_and_history_stay_short() -> None:
    assert len(RESULTS.splitlines()) < 500
    assert len((BENCH / "HISTORY.md").read_text(encoding="utf-8").splitlines()) < 125


def test_every_raw_file_is_cited_and_every_citation_exists() -> None:
    for raw in (BENCH / "raw").iterdir():
        assert f"bench/raw/{raw.name}" in RESULTS, f"{raw.name} is cited by no table"
    for cited in re.findall(r"bench/raw/[\w.-]+", RESULTS):
        assert (ROOT / cited).exists(), cited
