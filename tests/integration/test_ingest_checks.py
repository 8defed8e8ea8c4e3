"""`er ingest` settles the collection's name and id field before anything is read into
a batch or queued (issue #54): one line and exit code 2, nothing stored or sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.graph]


def _er(data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(data)
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "er.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _records(path: Path, first: int, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"record_id": f"r{i}", "name": f"person {i % 7}", "city": "leeds"}) + "\n"
            for i in range(first, first + n)
        )
    )
    return path


def _ingest(
    tmp: Path, first: int, collection: str, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``er ingest`` of 10 records numbered from ``first`` into ``collection``."""
    path = _records(tmp / f"r{first}.jsonl", first, 10)
    return _er(tmp / "data", "ingest", str(path), "--collection", collection, *args, **extra)


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b"])
def test_a_bad_collection_name_is_one_line(tmp_path: Path, name: str) -> None:
    done = _ingest(tmp_path, 0, name, "--id-field", "record_id")
    assert done.returncode == 2
    assert "collection name" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "collections").exists() and not (tmp_path / "data" / "x").exists()


def test_a_later_ingest_takes_the_stored_id_field(tmp_path: Path) -> None:
    first = _ingest(tmp_path, 0, "c", "--id-field", "record_id")
    assert first.returncode == 0, first.stderr
    assert "field types inferred" in first.stderr  # a new collection shows its types
    later = _ingest(tmp_path, 10, "c", "--json")
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout.splitlines()[-1])["accepted"] == 10
    assert "field types inferred" not in later.stderr
    wrong = _ingest(tmp_path, 20, "c", "--id-field", "id")
    assert wrong.returncode == 2
    assert "takes its ids from field 'record_id'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    shown = _er(tmp_path / "data", "status", "--collection", "c", "--json", "--no-model-check")
    assert json.loads(shown.stdout)[0]["mentions"] == 20  # the wrong one stored nothing


def test_a_queued_ingest_with_a_wrong_id_field_queues_nothing(tmp_path: Path) -> None:
    assert _ingest(tmp_path, 0, "c", "--id-field", "record_id").returncode == 0
    # a broker no worker listens on: anything queued would show as "queued ..."
    wrong = _ingest(
        tmp_path, 10, "c", "--id-field", "id", ER_BROKER_URL="redis://127.0.0.1:6379/15"
    )
    assert wrong.returncode == 2
    assert "takes its ids from field 'record_id'" in wrong.stderr
    assert "queued" not in wrong.stderr


def test_a_data_frames_index_is_not_compared(tmp_path: Path) -> None:
    """A CSV written with its data frame's index (a blank header) and a running count
    under a name of its own: both left out, and the user told (#53)."""
    names = ["ann lee", "bob kim", "cy ng", "di fox", "ed hu", "flo ray", "gus pike"]
    rows = [f"{i},{i + 500},r{i},{names[i % 7]},leeds" for i in range(60)]
    path = tmp_path / "x.csv"
    path.write_text(",form_number,record_id,name,city\n" + "\n".join(rows) + "\n")
    done = _er(
        tmp_path / "data", "ingest", str(path), "--collection", "c", "--id-field", "record_id"
    )
    assert done.returncode == 0, done.stderr
    assert "not compared: 'Unnamed: 0', 'form_number'" in done.stderr
    assert "field types inferred: name=person_name, city=place\n" in done.stderr
