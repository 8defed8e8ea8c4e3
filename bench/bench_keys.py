"""The blocking keys' cost per batch as the collection grows, against a peer commit's.

Issue #30 asks for candidate search whose cost per record is flat in n. This streams
the keys of people records (``people_real.py``, hard, the test seed, normalised by
their inferred field types as the writer does) through :class:`er.ann.KeyIndex` in
batches of 1,000 (add the batch, read each record's candidates), and through the
``KeyIndex`` of ``--peer`` (the module ``er/ann/_keys.py`` at that commit, loaded
beside this one) on the same batches, alternately, in one process. Every batch's
candidates must be equal (else it stops). At each size of ``--at``: the seconds per
batch (mean, p50, p95 and max of the ``--width`` batches before it, merges
included; er's large merges run on its merge thread, beside the next batches),
segments and GiB of each.

    python -m bench keys --n 1000000 --at 100000 300000 1000000 --peer 70bdf57
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _rows import emit
from people_real import TEST_SEED, real_people

BATCH = 1000
ROOT = Path(__file__).resolve().parent.parent


def peer_module(commit: str, into: Path) -> ModuleType:
    """``er/ann/_keys.py`` as of ``commit``, imported under another name."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:er/ann/_keys.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = into / "peer_keys.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("peer_keys", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def people_keys(n: int) -> NDArray[np.int64]:
    """(n, n_keys) the blocking keys of n hard people, as the writer derives them."""
    from er.ann import record_keys
    from er.pipeline.config import field_types, new_collection_config

    people = real_people(n, level="hard", seed=TEST_SEED)
    for p in people:
        p.pop("entity")
    config = new_collection_config(people[:BATCH], id_field="rec_id", gold_field=None)
    types = field_types(config)
    assert types is not None
    rows = types.normalise([{k: v for k, v in p.items() if k != "rec_id"} for p in people]).rows
    return np.vstack([record_keys(rows[s : s + 10_000], types.kinds) for s in range(0, n, 10_000)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--at", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--width", type=int, default=20, help="batches before each size")
    ap.add_argument("--peer", default="HEAD", help="commit whose KeyIndex runs beside")
    ap.add_argument("--json", type=Path, default=None, help="append one JSON row per size")
    args = ap.parse_args()
    from er.ann import KeyIndex

    keys = people_keys(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        peer = peer_module(args.peer, Path(tmp))
    indexes: dict[str, Any] = {
        "er": KeyIndex(keys.shape[1]),
        "peer": peer.KeyIndex(keys.shape[1]),
    }
    seconds: dict[str, list[float]] = {name: [] for name in indexes}
    for start in range(0, args.n, BATCH):
        got = {}
        for name, index in indexes.items():
            began = time.perf_counter()
            got[name] = index.candidates(index.add(keys[start : start + BATCH]))
            seconds[name].append(time.perf_counter() - began)
        if not np.array_equal(got["er"], got["peer"]):
            raise SystemExit(f"batch at {start}: candidates differ from the peer's")
        stop = start + BATCH
        if stop in args.at:
            row: dict[str, Any] = {"n": stop, "peer_commit": args.peer, "width": args.width}
            for name, index in indexes.items():
                last = np.asarray(seconds[name][-args.width :])
                row[name] = {
                    "mean_s": round(float(last.mean()), 4),
                    "p50_s": round(float(np.median(last)), 4),
                    "p95_s": round(float(np.percentile(last, 95)), 4),
                    "max_s": round(float(last.max()), 4),
                    "segments": len(index._segments),
                    "gib": round(index.nbytes / 2**30, 3),
                }
            row["machine"] = f"{platform.machine()}, Python {platform.python_version()}"
            emit(row, args.json)


if __name__ == "__main__":
    main()
