"""`er eval` at size (issue #31): wall time and peak memory of one evaluation run.

For each size, synthetic people (`people_real.py`, test seed) go through `er ingest`
with gold labels, embedded defaults, in a temporary data directory; then `er eval`
runs as its own process; its peak resident set and, apart, that of the embedded
graph server it starts are read from the kernel's high-water marks while it runs.
The ingest is timed too, but it is not what this measures.

    python -m bench eval --n 100000 [--level hard] [--json bench/raw/eval-....jsonl]
        [--workspace DIR] [--peer CHECKOUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _rows import emit
from bench_quality import er_env, er_workspace
from people_real import TEST_SEED, real_people


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed: {done.stderr[-2000:]}")
    return done


def measure(
    n: int, level: str, workspace: Path | None = None, peer: Path | None = None
) -> list[dict[str, Any]]:
    """Ingest n people, then time `er eval` (and the peer's, on the same collection).

    ``workspace`` keeps the ingested collection in that folder (``<workspace>/<n>``) and
    reuses it when it is there already (no ingest, ``ingest_seconds`` null); ``peer``
    is a checkout of another commit whose `er eval` runs right after this one's.
    """
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        here = tmp if workspace is None else workspace / str(n)
        ingest_s = None if (here / "data").exists() else _ingest(n, level, here)
        er, env = er_env(here)
        sha = _run(["git", "rev-parse", "--short", "HEAD"], env).stdout.strip()
        rows = [{"code": f"this {sha}+changes", **timed_eval(er, "p", env)}]
        if peer is not None:
            # run from the checkout: `python -m` puts the working folder first on the path
            env_peer = {**env, "PYTHONPATH": str(peer.resolve())}
            sha = _run(["git", "-C", str(peer), "rev-parse", "--short", "HEAD"], env).stdout
            rows.append({"code": f"peer {sha.strip()}", **timed_eval(er, "p", env_peer, peer)})
    return [{"n": n, "level": level, "ingest_seconds": ingest_s, **r} for r in rows]


def _ingest(n: int, level: str, folder: Path) -> float:
    """`er ingest` n people with gold labels into ``folder``; its seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    path, er, env = er_workspace(folder, real_people(n, level=level, seed=TEST_SEED))
    started = time.perf_counter()
    ingest = [*er, "ingest", str(path), "--collection", "p", "--id-field", "rec_id"]
    _run([*ingest, "--gold-field", "entity", "--batch-size", "1000", "--json"], env)
    return round(time.perf_counter() - started, 1)


def timed_eval(
    er: list[str], collection: str, env: dict[str, str], cwd: Path | None = None
) -> dict[str, Any]:
    """`er eval` of a collection as its own process: seconds, pairwise F1, and the peak
    resident memory of the eval process and, apart, of the embedded graph server it
    starts (the database holding the collection, whatever reads it)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        cmd = [*er, "eval", "--collection", collection, "--json"]
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
        peaks = _peaks_while(proc)
        eval_s = time.perf_counter() - started
        out.seek(0), err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"er eval failed: {err.read()[-2000:]}")
        figures = json.loads(out.read().strip().splitlines()[-1])
    return {
        "eval_seconds": round(eval_s, 1),
        "eval_peak_rss_mib": round(peaks.get("eval", 0) / 1024, 1),
        "graph_server_peak_rss_mib": round(peaks.get("graph_server", 0) / 1024, 1),
        "pairwise_f1": figures.get("pairwise_prf_at_cut", [None] * 3)[2],
    }


def _peaks_while(proc: subprocess.Popen[str], every: float = 0.1) -> dict[str, int]:
    """Peak resident KiB of ``proc`` (``eval``) and of its graph server child
    (``graph_server``) until ``proc`` ends: the kernel's high-water mark (VmHWM), read
    every ``every`` seconds (a mark only grows, so the last read before the end holds
    the peak up to then)."""
    peaks: dict[str, int] = {}
    while proc.poll() is None:
        for pid, role in _tree(proc.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):  # gone, or a zombie
                status = Path(f"/proc/{pid}/status").read_text()
                hwm = int(status.split("VmHWM:", 1)[1].split()[0])
                peaks[role] = max(peaks.get(role, 0), hwm)
        time.sleep(every)
    return peaks


def _tree(pid: int) -> list[tuple[int, str]]:
    """``pid`` (``eval``) and its child processes (``graph_server``: er forks the
    embedded server from a thread of its own, so the children are found by parent)."""
    try:
        children = [c.pid for c in psutil.Process(pid).children()]
    except psutil.Error:
        children = []
    return [(pid, "eval"), *((c, "graph_server") for c in children)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--level", default="hard", choices=["medium", "hard"])
    ap.add_argument("--json", type=Path, help="append one JSON line per size and code")
    ap.add_argument("--workspace", type=Path, help="keep (or reuse) the collections here")
    ap.add_argument("--peer", type=Path, help="a checkout of another commit to run beside")
    args = ap.parse_args()
    for n in args.n:
        for row in measure(n, args.level, args.workspace, args.peer):
            emit(row, args.json)


if __name__ == "__main__":
    main()
