"""Size of MBSCC's per-batch delta (what the graph write has to carry), in memory.

Synthetic person records (``bench/people.py``) featurized as the pipeline does (the
default config inferred from the first batch), fed to ``MBSCC().partial_fit`` in
batches; prints, at the given points, the batch's upserted nodes (leaves among them),
retired nodes, added and retired edges, the hierarchy's size and the fit time.

    python bench/bench_deltas.py --n 20000 --batch 1000 --at 1000 6000 11000 16000 20000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from people import synthetic_people

from er.cluster import MBSCC
from er.featurize import Featurizer, infer_config
from er.pipeline import PIPELINE_PARAMS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--at", type=int, nargs="+", default=[20_000])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    records = synthetic_people(args.n, seed=args.seed)
    featurize = Featurizer(
        infer_config(records[: args.batch], id_field="rec_id", gold_field="entity")
    )
    core = MBSCC(**PIPELINE_PARAMS["mbscc"])  # as a collection runs it
    for start in range(0, args.n, args.batch):
        X = featurize(records[start : start + args.batch])
        began = time.perf_counter()
        core.partial_fit(X)
        spent = time.perf_counter() - began
        stop = start + X.shape[0]
        if stop in args.at:
            d = core.delta_
            row = {
                "resolved": stop,
                "nodes": int(d.node_id.size),
                "leaves": int(d.is_leaf.sum()),
                "retired": int(d.retired.size),
                "edges_added": int(d.edges_added.shape[0]),
                "edges_retired": int(d.edges_retired.shape[0]),
                "hierarchy_nodes": int(core.hierarchy_.n_nodes),
                "fit_s": round(spent, 3),
            }
            print(json.dumps(row))


if __name__ == "__main__":
    main()
