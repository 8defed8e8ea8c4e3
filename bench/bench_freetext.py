"""Free text alone (Leipzig's affiliations): which pair model and which linkage it needs.

A study for issue #29, run before the product path had views: er resolved Leipzig to
pairwise F1 0.000 (``bench quality``), since one text field gives EM a single
comparison, which cannot tell matches from non-matches (any prior fits it). Here the
one string is compared in four views instead, each a comparison EM can weigh (the
product's views, er.match._views, follow these, with frozen document frequencies and
sparse average linkage over 100 neighbours, er.pipeline.config):

- ``cosine``: character 3-gram TF-IDF cosine (far < 0.4 <= 0.6 <= 0.8 <= close);
- ``rare``: the IDF-weighted share of the rarer side's tokens that both sides hold
  (far < 0.3 <= 0.6 <= 0.9 <= all);
- ``rarest``: how many of the two sides' rarest tokens the other side holds (0, 1, 2);
- ``numbers``: the digit tokens (missing on either side, none shared, one shared).

u from 500,000 random pairs, m and the prior by er's own EM (``er.match._train``) on
the candidates (each record's 10 nearest by the cosine), then the posteriors clustered
three ways and cut at a match probability:

- ``mean``: er's pipeline linkage (MBSCC, mean probability of the candidate pairs
  between two clusters, floor 0.05);
- ``sparse``: average linkage with the pairs the candidates left out counted as 0;
- ``dense``: average linkage over every pair inside a component of the candidate
  graph, the left-out pairs scored by the same model (what TF-IDF + HAC does with
  its cosine).

The peer is TF-IDF + HAC (``bench quality``'s, dense average on the char 2-4-gram
cosine). Scored as ``bench quality`` scores sets without a tuning seed: the mean over
the two halves of the entities, each half's records alone.

    python -m bench freetext
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_quality import (
    average_forests,
    clean,
    forest_cut,
    halves_score,
    tfidf_hac_tree,
)
from datasets import load

from er.cluster import MBSCC
from er.cluster._graph import best_per_row, row_entries
from er.evaluation import cut_at_score
from er.featurize._normalize import normalise_text
from er.match._model import level_bits
from er.match._train import _fit_em, _frequencies, random_pairs, starting_m

CUTS = (0.2, 0.3, 0.5)
K = 10
N_LEVELS = (5, 5, 4, 3)  # levels of each view, index 0 = missing


class Views:
    """The four comparisons of one text field (module docstring)."""

    def __init__(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.tokens = [set(t.split()) for t in texts]
        df = Counter(t for s in self.tokens for t in s)
        self.idf = {t: math.log(len(texts) / c) for t, c in df.items()}
        self.X = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 3)).fit_transform(texts)

    def levels(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int8]:
        """(p, 4) the level of each pair (a[i], b[i]) in each view."""
        cos = np.asarray(self.X[a].multiply(self.X[b]).sum(axis=1)).ravel()
        out = np.zeros((a.size, 4), np.int8)
        out[:, 0] = 1 + np.digitize(cos, [0.4, 0.6, 0.8])
        for i, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
            out[i, 1:] = self._token_levels(self.tokens[x], self.tokens[y])
        return out

    def _token_levels(self, A: set[str], B: set[str]) -> tuple[int, int, int]:
        if not A or not B:
            return 0, 0, 0
        idf = self.idf
        rarer = min(sum(idf[t] for t in A), sum(idf[t] for t in B))
        share = sum(idf[t] for t in A & B) / rarer if rarer > 0 else 0.0
        rarest_a = max(A, key=lambda t: (idf[t], t))
        rarest_b = max(B, key=lambda t: (idf[t], t))
        na = {t for t in A if t.isdigit()}
        nb = {t for t in B if t.isdigit()}
        numbers = 0 if not na or not nb else (2 if na & nb else 1)
        return (
            1 + int(np.digitize(share, [0.3, 0.6, 0.9])),
            1 + (rarest_a in B) + (rarest_b in A),
            numbers,
        )


def _candidates(X: object, n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Distinct unordered pairs of each record and its K nearest by cosine."""
    from sklearn.neighbors import NearestNeighbors

    _, idx = NearestNeighbors(n_neighbors=K + 1, metric="cosine").fit(X).kneighbors(X)
    left, right = np.repeat(np.arange(n), K + 1), idx.ravel()
    ok = left != right
    key = np.unique(np.minimum(left[ok], right[ok]) * n + np.maximum(left[ok], right[ok]))
    return key // n, key % n


def _mean_linkage(
    n: int, pairs: tuple[NDArray[np.int64], NDArray[np.int64]], prob: NDArray[np.float64]
) -> Callable[[float], NDArray[np.int64]]:
    """er's pipeline core on the scored candidates: a cut at a probability."""
    from scipy import sparse

    both = (np.r_[pairs[0], pairs[1]], np.r_[pairs[1], pairs[0]])
    P = sparse.csr_array((np.r_[prob, prob], both), shape=(n, n))
    width = max(int(np.diff(P.indptr).max()), 1)
    pos, row = row_entries(P.indptr, np.arange(n))
    col = pos - P.indptr[row]
    idx, sim = np.full((n, width), -1, np.int64), np.zeros((n, width), np.float32)
    idx[row, col], sim[row, col] = P.indices[pos], P.data[pos]
    core = MBSCC(linkage="mean", schedule="geometric", n_levels=30, tau_min=0.05)
    neighbors = best_per_row(idx, sim, width)
    tree = core.partial_fit(np.zeros((n, 1), np.float32), neighbors=neighbors).hierarchy_
    return lambda t: cut_at_score(tree, t)


def _average_linkage(
    n: int,
    pairs: tuple[NDArray[np.int64], NDArray[np.int64]],
    prob: NDArray[np.float64],
    dense: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]] | None,
) -> Callable[[float], list[str]]:
    """Average-linkage HAC inside each component of the candidates (probability > 0.05):
    the left-out pairs 0 (``dense`` None) or scored by ``dense``."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    P = sparse.coo_array((prob, pairs), shape=(n, n)).tocsr()
    P = P + P.T
    _, comp = connected_components(P > 0.05, directed=False)

    def similarity(rows: NDArray[np.int64]) -> NDArray[np.float64]:
        if dense is None:
            return np.asarray(P[rows][:, rows].toarray(), np.float64)
        i, j = np.triu_indices(rows.size, 1)
        S = np.zeros((rows.size, rows.size))
        S[i, j] = dense(rows[i], rows[j])
        return S + S.T

    return forest_cut(average_forests(comp, similarity), n)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    records, gold, _ = load("leipzig")
    texts = [normalise_text(r["affiliation"]) or "" for r in records]
    n = len(texts)
    views = Views(texts)
    pairs = _candidates(views.X, n)
    cand = views.levels(*pairs)
    u = [
        _frequencies(views.levels(*random_pairs(n, 500_000, 0))[:, f], k)
        for f, k in enumerate(N_LEVELS)
    ]
    m0 = [starting_m(k) for k in N_LEVELS]
    total = n * (n - 1) // 2
    m, prior, post = _fit_em(cand, m0, u, total)
    same = np.asarray(gold)[pairs[0]] == np.asarray(gold)[pairs[1]]
    said = post > 0.5
    print(
        json.dumps(
            {
                "records": n,
                "candidate_pairs": int(post.size),
                "em_matching_pairs": round(prior * total, 1),
                "true_matches_among_candidates": int(same.sum()),
                "posterior_over_half": int(said.sum()),
                "its_precision": round(float(same[said].mean()), 4),
                "its_recall_of_candidate_matches": round(float(said[same].mean()), 4),
                "bits_per_level": [
                    np.round(level_bits(mf, uf)[1:], 2).tolist()
                    for mf, uf in zip(m, u, strict=True)
                ],
            }
        )
    )

    def model(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        lv = views.levels(a, b)
        w = np.log2(prior / (1 - prior)) + sum(level_bits(m[f], u[f])[lv[:, f]] for f in range(4))
        return np.asarray(1.0 / (1.0 + np.exp2(-w)), np.float64)

    mean = _mean_linkage(n, pairs, post)
    systems: dict[str, Callable[[float], list[str]]] = {
        "views, mean (er's linkage)": lambda t: [str(x) for x in mean(t)],
        "views, sparse average": _average_linkage(n, pairs, post, None),
        "views, dense average": _average_linkage(n, pairs, post, model),
        "peer: TF-IDF 2-4-gram cosine, dense average": tfidf_hac_tree(clean(records)),
    }
    for name, cut in systems.items():
        for t in CUTS:
            half = {k: round(v, 4) for k, v in halves_score(gold, cut(t)).items()}
            print(json.dumps({"system": name, "cut": t, **half}))


if __name__ == "__main__":
    main()
