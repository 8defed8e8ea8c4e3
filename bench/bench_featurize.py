"""Featurizer dimension and entity cut on FEBRL, with fastcluster's HAC as the peer.

    python bench/bench_featurize.py dims   # FEBRL3: quality and time per dimension
    python bench/bench_featurize.py carry  # FEBRL1/2/4: the FEBRL3-chosen defaults elsewhere
    python bench/bench_featurize.py dims --dims 256 512 --ngrams 3  # another encoding

The featurizer config is the one er infers from the first 500 records (every text
field as character 2- and 3-grams, weight 1); MBSCC runs in batches of 500 as the
pipeline does; entities are the cut at the score given. HAC: average linkage on the
same vectors (cosine), its best threshold over a fine grid (an upper bound the
pipeline cannot pick after the fact).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import fastcluster
import numpy as np
from scipy.cluster.hierarchy import fcluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from people import febrl_set

from er.cluster import MBSCC
from er.evaluation import bcubed, cut_at_score, pairwise_prf
from er.featurize import DEFAULT_DIM, FeaturizerConfig, featurize, infer_config
from er.pipeline import DEFAULT_ENTITY_CUT, PIPELINE_PARAMS


def with_encoding(
    cfg: FeaturizerConfig, dim: int | None, ngrams: Sequence[int] | None
) -> FeaturizerConfig:
    """``cfg`` with another dimension and every field's n-gram sizes, where given."""
    cfg = cfg if dim is None else replace(cfg, dim=dim)
    if ngrams:
        cfg = replace(cfg, fields=tuple(replace(f, n=tuple(ngrams)) for f in cfg.fields))
    return cfg


def _data(
    name: str, dim: int, ngrams: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray, float]:
    records = febrl_set(name)
    cfg = with_encoding(
        infer_config(records[:500], id_field="rec_id", gold_field="entity"), dim, ngrams
    )
    started = time.perf_counter()
    X = featurize(records, cfg)
    seconds = time.perf_counter() - started
    gold = np.unique([r["entity"] for r in records], return_inverse=True)[1]
    return X, gold, seconds


def _mbscc(X: np.ndarray, batch: int = 500) -> tuple[object, float]:
    core = MBSCC(**PIPELINE_PARAMS["mbscc"])  # as a collection runs it
    started = time.perf_counter()
    for start in range(0, X.shape[0], batch):
        core.partial_fit(X[start : start + batch])
    return core.hierarchy_, time.perf_counter() - started


def _hac(X: np.ndarray, gold: np.ndarray) -> tuple[float, float, float]:
    started = time.perf_counter()
    Z = fastcluster.linkage(X.astype(np.float64), method="average", metric="cosine")
    seconds = time.perf_counter() - started
    best = max(
        (pairwise_prf(gold, fcluster(Z, t, "distance"))[2], 1 - t)
        for t in np.linspace(0.05, 0.95, 91)
    )
    return best[0], best[1], seconds


def row(
    name: str, dim: int, cuts: list[float], ngrams: tuple[int, ...] | None = None
) -> dict[str, object]:
    X, gold, feat_s = _data(name, dim, ngrams)
    h, mb_s = _mbscc(X)
    hac_f1, hac_sim, hac_s = _hac(X, gold)
    out: dict[str, object] = {
        "data": name,
        "n": int(X.shape[0]),
        "dim": dim,
        "ngrams": list(ngrams) if ngrams else "inferred",
        "featurize_s": round(feat_s, 2),
        "mbscc_s": round(mb_s, 2),
        "hac_s": round(hac_s, 2),
        "hac_best_pairwise_f1": round(float(hac_f1), 4),
        "hac_best_similarity": round(float(hac_sim), 2),
    }
    for cut in cuts:
        pred = cut_at_score(h, cut)
        out[f"mbscc_pairwise_f1@{cut}"] = round(float(pairwise_prf(gold, pred)[2]), 4)
        out[f"mbscc_bcubed_f1@{cut}"] = round(float(bcubed(gold, pred)[2]), 4)
    out["machine"] = f"{platform.machine()} {platform.processor() or ''}".strip()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("dims", "carry"))
    parser.add_argument("--dims", type=int, nargs="+", default=None, help="dimensions to run")
    parser.add_argument("--ngrams", type=int, nargs="+", default=None, help="n-gram sizes")
    args = parser.parse_args()
    ngrams = tuple(args.ngrams) if args.ngrams else None
    if args.what == "dims":
        jobs = [
            ("dataset3", d, [0.35, 0.4, DEFAULT_ENTITY_CUT, 0.5, 0.55])
            for d in (args.dims or (256, 512, 1024, 4096))
        ]
    else:
        jobs = [
            (n, d, [0.4, DEFAULT_ENTITY_CUT, 0.5])
            for d in (args.dims or (DEFAULT_DIM,))
            for n in ("dataset1", "dataset2", "dataset4")
        ]
    command = " ".join(["python bench/bench_featurize.py", *sys.argv[1:]])
    for name, dim, cuts in jobs:
        print(json.dumps({**row(name, dim, cuts, ngrams), "command": command}), flush=True)


if __name__ == "__main__":
    main()
