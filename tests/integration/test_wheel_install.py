"""A plain (non-editable) install works: build the wheel, install it into a fresh venv
outside the checkout, and run the README's main job from another folder.

Before schema/ and migrations/ were packaged (as ``er._schema`` and ``er._migrations``),
``er demo`` from such an install failed with "Path doesn't exist: .../migrations".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd[:3]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        tmp_path,
        dict(os.environ),
    )
    [wheel] = wheels.glob("er-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    _run([str(py), "-m", "pip", "install", "-q", str(wheel)], tmp_path, dict(os.environ))

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ER_", "PYTHON"))}
    env["ER_DATA_DIR"] = str(work / "data")
    er = str(env_dir / "bin" / "er")
    # the installed package is imported, not the checkout
    location = _run([str(py), "-c", "import er; print(er.__file__)"], work, env)
    assert str(env_dir) in location and str(ROOT) not in location
    _run([er, "init"], work, env)
    _run([er, "demo"], work, env)
    out = _run(
        [er, "query", "ancestors", "--collection", "febrl3", "--mention", "rec-1496-org"], work, env
    )
    assert out.strip(), "er query printed nothing"
    # the report's template ships in the wheel (package data, not a module)
    out = _run([er, "eval", "--collection", "febrl3", "--json"], work, env)
    report = Path(json.loads(out.strip().splitlines()[-1])["report_path"])
    assert str(work) in str(report) and "Largest false merges" in report.read_text()
