"""The `er` command on embedded defaults (SQLite and FalkorDB under a data dir), as a
user runs it: a subprocess with a clean ER_ environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its ER_ settings, the data dir set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def run_er(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``er ARGS`` in a subprocess with exactly ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def er(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``er ARGS`` on the stores under ``data_dir`` (extra: ER_ settings)."""
    return run_er(embedded_env(data_dir, **extra), *args)


def ingest_and_eval(tmp_path: Path, records: list[dict[str, Any]]) -> tuple[Path, Any]:
    """`er ingest` the records as collection "c" (ids in "rec_id", gold in "entity"),
    then `er eval`; the data dir and eval's JSON."""
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    data = tmp_path / "data"
    done = er(
        data,
        "ingest",
        str(path),
        *("--collection", "c", "--id-field", "rec_id", "--gold-field", "entity"),
        *("--batch-size", "500"),
    )
    assert done.returncode == 0, done.stderr
    done = er(data, "eval", "--collection", "c", "--json")
    assert done.returncode == 0, done.stderr
    return data, json.loads(done.stdout.strip().splitlines()[-1])
