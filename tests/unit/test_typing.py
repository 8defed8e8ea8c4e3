"""mypy --strict passes on er and workers (``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a cold check of every module: about 30 s on two cores
def test_mypy_strict_passes() -> None:
    # No cache is read or written (os.devnull: mypy's documented off switch): nothing
    # lands in the work tree, which may be read-only, and no stale state is shared.
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        os.devnull,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"mypy failed:\n{done.stdout}{done.stderr}"
