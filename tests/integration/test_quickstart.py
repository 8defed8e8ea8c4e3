"""The README's quick start, pasted step by step in one shell, works as written.

The commands are read from README.md itself: the numbered steps of its "Quick start:
production services" section (each step's indented blocks and backticked commands, in
order: every backticked span in a step is a command), then the closing "Stop the worker
with `...`". A README edit that breaks that format fails the parser, so the page cannot
drift from the product unnoticed.

They run in one bash process under ``set -euo pipefail``, as a user pasting them would,
at the root of a fresh copy of the checkout (its files that are tracked, or untracked and
not ignored) against the real PostgreSQL and Redis. The substitutions, and nothing else:

- step 1's venv + pip line is skipped: the test's own interpreter already has er
  installed. Its bin directory goes first on PATH, so ``er`` and ``python`` are its own,
  and the copy goes first on PYTHONPATH, the code an editable install would import;
- the database ``er`` becomes a database of the test's own (made by the README's
  ``createdb``, dropped after), and Redis database 0 becomes ``QUICKSTART_REDIS_DB``:
  a user's ``er`` database and default broker are never touched;
- BROWSER names a script that records the address ``er report open`` hands it (where
  no browser is found, er prints the file:// address instead).

The caller's ER_ settings, COLUMNS and LINES are left out of the shell's environment.
ER_DATA_DIR is the README's own ``$PWD/.er-prod``: inside the copy, under tmp_path. An
EXIT trap kills the worker (``kill %1``) if a step fails; whatever is left of the shell's
process group is killed after.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import psutil
import pytest

from tests.conftest import PG_ADMIN_URL

from ._procs import QUICKSTART_REDIS_DB

pytestmark = [pytest.mark.celery, pytest.mark.postgres, pytest.mark.graph, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Quick start: production services"
MARK = "@@quickstart@@ "  # starts the line the script prints before each command
MIN_PAIRWISE_F1 = 0.9  # 2,000 medium people; measured 0.976
TIMEOUT_S = 900

_ITEM = re.compile(r"(\d+)\. ")
_INLINE = re.compile(r"`([^`]+)`")
_STOP = re.compile(r"Stop the worker with `([^`]+)`")
_SKIPPED = re.compile(r"python3 -m venv \.venv\b")  # step 1's install line


@dataclass(frozen=True)
class Command:
    step: str  # "step 3", or "end" for the closing stop command
    text: str


def quick_start(readme: str) -> list[Command]:
    """The quick start's commands in order; ValueError naming what cannot be parsed."""
    lines = readme.splitlines()
    if SECTION not in lines:
        raise ValueError(f"README.md has no line {SECTION!r}")
    start = lines.index(SECTION) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    items: list[tuple[int, int, list[str]]] = []  # number, content indent, lines
    tail: list[str] = []
    for line in lines[start:end]:
        item = _ITEM.match(line)
        if item and not tail:
            indent = item.end()
            items.append((int(item[1]), indent, [" " * indent + line[indent:]]))
        elif items and not tail and (not line.strip() or line.startswith(" ")):
            items[-1][2].append(line)
        elif items:
            tail.append(line)
    numbers = [n for n, _, _ in items]
    if len(numbers) < 2 or numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"the quick start's steps are not numbered 1, 2, ...: {numbers}")
    commands: list[Command] = []
    for number, indent, item_lines in items:
        found = _item_commands(item_lines, indent)
        if not found:
            raise ValueError(f"quick start step {number} has no command (indented or `...`)")
        commands += [Command(f"step {number}", c) for c in found]
    stop = _STOP.search(" ".join(tail))
    if stop is None:
        raise ValueError("the quick start does not end with 'Stop the worker with `...`'")
    return [*commands, Command("end", stop[1])]


def _item_commands(lines: list[str], indent: int) -> list[str]:
    """A numbered item's commands: code lines (indented 4 past its text) and the
    backticked spans of its paragraphs, in order."""
    commands: list[str] = []
    paragraph: list[str] = []

    def end_paragraph() -> None:
        commands.extend(_INLINE.findall(" ".join(paragraph)))
        paragraph.clear()

    for line in lines:
        if not line.strip():
            end_paragraph()
        elif len(line) - len(line.lstrip(" ")) >= indent + 4:
            end_paragraph()
            commands.append(line.strip())
        else:
            paragraph.append(line.strip())
    end_paragraph()
    return commands


def _substituted(commands: list[Command], database: str) -> list[Command]:
    """The test's substitutions (module docstring), each required to apply exactly once."""
    skipped = [c for c in commands if _SKIPPED.match(c.text)]
    if [c.step for c in skipped] != ["step 1"]:
        raise ValueError("the quick start's step 1 no longer has one 'python3 -m venv' line")
    rules = [
        (r"(createdb -h 127\.0\.0\.1 )er\b", rf"\g<1>{database}"),
        (r"(@127\.0\.0\.1:5432/)er\b", rf"\g<1>{database}"),
        (r"(redis://127\.0\.0\.1:6379/)0\b", rf"\g<1>{QUICKSTART_REDIS_DB}"),
    ]
    out = [c for c in commands if c not in skipped]
    for pattern, replacement in rules:
        hits = sum(len(re.findall(pattern, c.text)) for c in out)
        if hits != 1:
            raise ValueError(f"the quick start has {hits} matches of {pattern!r}, not one")
        out = [Command(c.step, re.sub(pattern, replacement, c.text)) for c in out]
    return out


def _script(commands: list[Command]) -> str:
    lines = ["set -euo pipefail", "trap 'kill %1 2>/dev/null || true; wait' EXIT"]
    for c in commands:
        lines.append(f"printf '%s\\n' {shlex.quote(f'{MARK}{c.step}: {c.text}')}")
        lines.append(c.text)
    return "\n".join(lines) + "\n"


def _sections(output: str) -> list[tuple[str, str]]:
    """(marker line, the output after it) per command the script reached."""
    sections: list[tuple[str, str]] = []
    for line in output.splitlines(keepends=True):
        if line.startswith(MARK):
            sections.append((line[len(MARK) :].strip(), ""))
        elif sections:
            sections[-1] = (sections[-1][0], sections[-1][1] + line)
    return sections


def _output_of(sections: list[tuple[str, str]], command: str) -> str:
    found = [out for head, out in sections if head.split(": ", 1)[1].startswith(command)]
    assert len(found) == 1, f"the quick start ran {len(found)} commands starting {command!r}"
    return found[0]


def _copy_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a deleted tracked file is listed too
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes(source.read_bytes())


def _group(pgid: int) -> list[psutil.Process]:
    alive = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                alive.append(p)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


def _env(work: Path, browser: Path) -> dict[str, str]:
    # no ER_ setting of the caller's; COLUMNS and LINES unset: rich's 80 columns for a pipe
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    bin_dir = Path(sys.executable).parent  # not resolved: the venv's bin, not the base's
    assert (bin_dir / "er").exists(), f"no er beside {sys.executable}"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(work), env.get("PYTHONPATH")]))
    env["BROWSER"] = str(browser)
    return env


def _run(script: Path, work: Path, env: dict[str, str]) -> tuple[int, str, list[str]]:
    """Run the script in its own process group: exit code, output, and what of the group
    outlived the shell (after 60 s), all of which is then killed."""
    shell = subprocess.Popen(
        ["bash", "--noprofile", "--norc", str(script)],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = shell.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        output, _ = shell.communicate()
        output += f"\n(killed after {TIMEOUT_S} s)\n"
    deadline = time.monotonic() + 60
    while (left := _group(shell.pid)) and time.monotonic() < deadline:
        time.sleep(1)
    leftovers = []
    for p in left:
        with contextlib.suppress(psutil.Error):
            leftovers.append(" ".join(p.cmdline()[:4]))
            p.kill()
    return shell.returncode, output, leftovers


def _drop(database: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')  # our own name


def _flush_redis() -> None:
    import redis

    redis.Redis(host="127.0.0.1", port=6379, db=QUICKSTART_REDIS_DB).flushdb()


def _status_row(text: str, collection: str) -> dict[str, str]:
    """The ``er status`` table's row for ``collection``, by column name."""
    head = next(line for line in text.splitlines() if "┃" in line and "collection" in line)
    row = next(line for line in text.splitlines() if line.startswith(f"│ {collection} "))
    names = [cell.strip() for cell in head.strip("┃ ").split("┃")]
    return dict(zip(names, (cell.strip() for cell in row.strip("│ ").split("│")), strict=True))


def test_the_readme_quick_start_works_as_written(tmp_path: Path) -> None:
    commands = quick_start((ROOT / "README.md").read_text())
    database = f"er_quickstart_{uuid.uuid4().hex[:8]}"
    commands = _substituted(commands, database)
    work = tmp_path / "er"
    _copy_checkout(work)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "record-browser"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {shlex.quote(str(opened))}\n')
    browser.chmod(0o755)
    script = tmp_path / "quickstart.sh"
    script.write_text(_script(commands))

    _flush_redis()
    try:
        code, output, leftovers = _run(script, work, _env(work, browser))
    finally:
        _drop(database)
        _flush_redis()

    sections = _sections(output)
    worker_log = work / "worker.log"
    log = worker_log.read_text() if worker_log.exists() else "(no worker.log)"
    if code != 0:
        head, out = sections[-1] if sections else ("before the first command", output)
        pytest.fail(
            f"the quick start failed (exit {code}) at {head}\n{out[-6000:]}\n"
            f"--- worker.log, last 3000 characters ---\n{log[-3000:]}",
            pytrace=False,
        )
    assert not leftovers, f"still running after `kill %1`: {leftovers}"
    assert "Traceback" not in log, log[-6000:]
    assert [head for head, _ in sections] == [f"{c.step}: {c.text}" for c in commands]

    ingest = _output_of(sections, "er ingest")
    counts = re.search(r"(\d+) batches, (\d+) accepted, (\d+) duplicates, (\d+) rejected", ingest)
    assert counts, ingest
    batches, accepted, duplicates, rejected = map(int, counts.groups())
    with (work / "people.csv").open(newline="") as f:
        people = [row["rec_id"] for row in csv.DictReader(f)]
    assert accepted > 0 and accepted + duplicates + rejected == len(people), ingest

    status = _status_row(_output_of(sections, "er status"), "people")
    assert int(status["done"]) == batches, status
    assert (status["pending"], status["running"], status["failed"]) == ("0", "0", "0"), status
    assert int(status["mentions"]) == accepted, status

    with (work / "entities.csv").open(newline="") as f:
        exported = list(csv.reader(f))
    assert exported[0] == ["external_id", "entity_id"]
    ids = [row[0] for row in exported[1:]]
    assert len(ids) == len(set(ids)) == accepted  # one row per accepted record
    assert set(ids) <= set(people)

    scores = _output_of(sections, "er eval")
    pairwise = re.search(r"pairwise_prf\s*│\s*([\d.]+)\s*│\s*([\d.]+)\s*│\s*([\d.]+)", scores)
    assert pairwise, scores
    assert float(pairwise[3]) >= MIN_PAIRWISE_F1, scores

    (uri,) = opened.read_text().splitlines()  # `er report open` handed the browser one page
    page = Path(unquote(urlparse(uri).path))
    assert uri.startswith("file://") and page.is_relative_to(work / ".er-prod" / "reports"), uri
    assert "<html" in page.read_text().lower()

    explained = _output_of(sections, "er query explain")
    assert f"'{ids[0]}' and '{ids[1]}'" in explained, explained  # rows 2 and 3 of the export
    probability = re.search(r"match probability (\d+(?:\.\d+)?)", explained)
    assert probability and 0.0 <= float(probability[1]) <= 1.0, explained
