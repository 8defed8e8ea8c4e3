"""Entity-resolution quality on realistic records: er against Splink and TF-IDF + HAC.

One run scores every system on the same records (``datasets.py``): pairwise and
B-cubed precision, recall and F1 of each system's final partition, and its wall time.

- ``er``: the raw records as JSON Lines through the real CLI on embedded defaults
  (``er ingest`` in process, batches of 1,000, then ``er export entities``); its
  settings are the product's defaults, fixed before any of these sets was read.
  Records er refuses are scored as their own entities.
- ``splink``: Splink (DuckDB), unsupervised as its documentation describes for people
  (u by random sampling, the prior from deterministic rules, m by EM on blocked pairs,
  term-frequency adjustments on names and places), then its own clustering
  (connected components at a match probability). For organisations and affiliation
  strings, one name comparison with token-set levels.
- ``tfidf-hac``: character 2-4-gram TF-IDF of all fields joined, cosine, average-linkage
  HAC (scipy) within the components of a 20-NN graph, cut at a distance.

Both peers get cleaned records (lower case, no punctuation, dates read to ISO with
``dateutil``, phones and ids to digits), written here, not er's normalisers. Their
threshold is chosen on the tuning seed of the same generator (and level; the people
and ``orgs-places``); sets without
seeds (FEBRL, PATSTAT, Leipzig) use 2-fold cross-fitting by entity: the threshold
best on one half of the entities scores the other half, and the two are averaged.
er is scored on the same halves, the same way. ``full_*`` figures score every record
at once, what a user gets (a half hides the false merges across the halves, which
lifts a system's precision; TF-IDF + HAC on Leipzig, 0.61 -> 0.78): er's at its
cut, a peer's at each half's threshold, the two averaged. ``er-dev-cut`` is er
under the peers' own protocol on those sets: ingested with one half's gold labels,
its cut set by ``er cut --gold`` (the best pairwise F1 of the labelled mentions),
scored on the other half. ``er-2fold`` is er under the peers' exact protocol: one
ingest of the raw records, its hierarchy cut at each threshold of the peers' grid
(``er cut --threshold``), the threshold chosen and scored by the same code as theirs.

    python -m bench quality --sets people-hard-10k febrl3 patstat --systems er splink tfidf-hac
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from datasets import NAMES, SEEDED, load

from er.evaluation import bcubed, pairwise_prf

GRID = np.round(np.r_[np.linspace(0.05, 0.95, 19), 0.97, 0.99, 0.995, 0.999], 4)


# -- er ---------------------------------------------------------------------------------------
def er_workspace(
    tmp: Path, records: list[dict[str, Any]]
) -> tuple[Path, list[str], dict[str, str]]:
    """The records as JSON lines in ``tmp``, the `er` command, and an environment whose
    embedded stores live in ``tmp`` (no ER_ setting of the caller's leaks in)."""
    path = tmp / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, *er_env(tmp)


def er_env(tmp: Path) -> tuple[list[str], dict[str, str]]:
    """The `er` command and an environment whose embedded stores live in ``tmp/data``
    (no ER_ setting of the caller's leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ER_")}
    env["ER_DATA_DIR"] = str(tmp / "data")
    return [sys.executable, "-m", "er.cli"], env


def run_er(records: list[dict[str, str]]) -> tuple[list[str], dict[str, Any]]:
    """er on the raw records through the CLI, embedded defaults, in process."""
    with tempfile.TemporaryDirectory() as tmp:
        er, env = _er_ingest(Path(tmp), records)
        return _er_export(er, env, records)


def _er_ingest(
    tmp: Path, records: list[dict[str, str]], dev: list[str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """``er ingest`` of the raw records (with ``dev``, each record's development label,
    "" for none, in a ``dev_gold`` field named by ``--gold-field``)."""
    if dev is not None:
        records = [{**r, "dev_gold": g} for r, g in zip(records, dev, strict=True)]
    path, er, env = er_workspace(tmp, records)
    ingest = [*er, "ingest", str(path), "--collection", "q", "--id-field", "rec_id"]
    if dev is not None:
        ingest += ["--gold-field", "dev_gold"]
    done = subprocess.run(
        [*ingest, "--batch-size", "1000", "--json"], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return er, env


def _er_export(
    er: list[str], env: dict[str, str], records: list[dict[str, str]]
) -> tuple[list[str], dict[str, Any]]:
    out = subprocess.run(
        [*er, "export", "entities", "--collection", "q"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    entity = {r["external_id"]: r["entity_id"] for r in csv.DictReader(out.splitlines())}
    pred = [entity.get(r["rec_id"]) or f"refused:{r['rec_id']}" for r in records]
    return pred, {"refused": sum(1 for r in records if r["rec_id"] not in entity)}


# -- the peers' cleaning (their own; not er's normalisers) ------------------------------------
def clean(records: list[dict[str, str]], dayfirst: bool = True) -> list[dict[str, str]]:
    """Lower case, no punctuation; dates to ISO (dateutil, day first but on US sets),
    phones to their last 9 digits, ids to digits: what a careful user does before
    running a peer."""
    out = []
    for r in records:
        c = {"rec_id": r["rec_id"]}
        for k, v in r.items():
            if k == "rec_id":
                continue
            v = (v or "").strip().lower()
            if k in ("dob", "date_of_birth"):
                v = _iso(v, dayfirst)
            elif k in ("phone", "national_id", "soc_sec_id", "ssn"):
                v = re.sub(r"\D", "", v)[-9:]
            elif k != "email":
                v = " ".join(re.sub(r"[^\w\s]", " ", v).split())
            c[k] = v
        out.append(c)
    return out


def _iso(text: str, dayfirst: bool = True) -> str:
    from dateutil import parser

    if not text:
        return ""
    try:
        return parser.parse(text, dayfirst=dayfirst, yearfirst=len(text) == 8).date().isoformat()
    except (ValueError, OverflowError):
        return ""


# -- TF-IDF + average-linkage HAC --------------------------------------------------------------
def tfidf_hac_tree(records: list[dict[str, str]]) -> Callable[[float], list[str]]:
    """A function cutting the peer's HAC forest at a cosine similarity."""
    from scipy.sparse.csgraph import connected_components
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.neighbors import NearestNeighbors

    texts = [" ".join(v for k, v in r.items() if k != "rec_id") for r in records]
    X = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=1).fit_transform(texts)
    k = min(20, len(texts) - 1)
    G = NearestNeighbors(n_neighbors=k, metric="cosine").fit(X).kneighbors_graph(mode="distance")
    G.data = 1.0 - G.data
    G.data[G.data < 0.2] = 0.0  # components of the graph at a loose similarity
    G.eliminate_zeros()
    _, comp = connected_components(G, directed=False)
    forests = average_forests(comp, lambda rows: (X[rows] @ X[rows].T).toarray(), X)
    return forest_cut(forests, len(records))


# Past this many rows a component's distances are built a block of rows at a time in
# float32 (35,000 strings in one component: a dense float64 product and its copies
# took more than the machine's 24 GiB); below it, as before.
LEAN_ROWS = 20_000


def _lean_distances(X: Any, rows: np.ndarray) -> np.ndarray:
    """Condensed cosine distances (float64, as ``linkage`` takes them) of the rows of
    the sparse matrix ``X``, computed 2,000 rows at a time."""
    n = rows.size
    out = np.empty(n * (n - 1) // 2, np.float64)
    Xr = X[rows].astype(np.float32)
    start = 0
    for lo in range(0, n, 2_000):
        block = (Xr[lo : lo + 2_000] @ Xr.T).toarray()
        for i in range(block.shape[0]):
            r = lo + i
            tail = 1.0 - block[i, r + 1 :]
            out[start : start + tail.size] = np.clip(tail, 0, 2)
            start += tail.size
    return out


def average_forests(
    comp: np.ndarray, similarity: Callable[[np.ndarray], np.ndarray], X: Any = None
) -> list[Any]:
    """Average-linkage HAC inside each component (``comp``: (n,) component of each
    row): (rows, linkage matrix or None for a single row) per component, from
    ``similarity(rows)``, the (r, r) similarities of the component's rows (or, past
    :data:`LEAN_ROWS` rows and given ``X``, the sparse unit rows, their cosines)."""
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    forests = []
    for c in np.unique(comp):
        rows = np.flatnonzero(comp == c)
        if rows.size == 1:
            forests.append((rows, None))
            continue
        if X is not None and rows.size > LEAN_ROWS:
            forests.append((rows, linkage(_lean_distances(X, rows), "average")))
            continue
        D = np.clip(1.0 - similarity(rows), 0, 2)
        np.fill_diagonal(D, 0)
        forests.append((rows, linkage(squareform(D, checks=False), "average")))
    return forests


def forest_cut(forests: list[Any], n: int) -> Callable[[float], list[str]]:
    """A function cutting :func:`average_forests` at a similarity: a label per row."""
    from scipy.cluster.hierarchy import fcluster

    def cut(sim: float) -> list[str]:
        labels = np.empty(n, dtype=object)
        for i, (rows, Z) in enumerate(forests):
            if Z is None:
                labels[rows] = f"{i}"
            else:
                part = fcluster(Z, t=1.0 - sim, criterion="distance")
                labels[rows] = [f"{i}.{p}" for p in part]
        return labels.tolist()

    return cut


# -- Splink ------------------------------------------------------------------------------------
def splink_scores(records: list[dict[str, str]], family: str) -> Callable[[float], list[str]]:
    """A function clustering Splink's pairwise predictions at a match probability."""
    import logging

    import pandas as pd
    import splink.comparison_library as cl
    from splink import DuckDBAPI, Linker, SettingsCreator, block_on

    logging.getLogger("splink").setLevel(logging.ERROR)
    # RLdata's birth year, month and day: "by" is an SQL keyword Splink does not quote
    birth = {"by": "birth_year", "bm": "birth_month", "bd": "birth_day"}
    df = pd.DataFrame(records).rename(columns={"rec_id": "unique_id", **birth})
    fields = set(df.columns)
    comparisons, blocks, train_blocks, det = _splink_design(cl, block_on, fields, family)
    settings = SettingsCreator(
        link_type="dedupe_only",
        comparisons=comparisons,
        blocking_rules_to_generate_predictions=blocks,
        retain_intermediate_calculation_columns=False,
    )
    db = DuckDBAPI()
    # Splink 4.0.x takes the frame and its backend; later releases register the frame first
    linker = (
        Linker(db.register(df), settings) if hasattr(db, "register") else Linker(df, settings, db)
    )
    linker.training.estimate_probability_two_random_records_match(det, recall=0.7)
    linker.training.estimate_u_using_random_sampling(max_pairs=2e6, seed=1)
    for rule in train_blocks:
        linker.training.estimate_parameters_using_expectation_maximisation(rule)
    pred = linker.inference.predict(threshold_match_probability=0.01)
    ids = df["unique_id"].tolist()

    def cut(p: float) -> list[str]:
        clusters = linker.clustering.cluster_pairwise_predictions_at_threshold(
            pred, threshold_match_probability=float(p)
        ).as_pandas_dataframe()
        label = dict(zip(clusters["unique_id"], clusters["cluster_id"], strict=True))
        return [str(label.get(i, f"single:{i}")) for i in ids]

    return cut


def _splink_design(cl: Any, block_on: Any, fields: set[str], family: str) -> tuple[Any, ...]:
    """Comparisons, prediction blocking, EM blocking and deterministic rules per family."""
    if family in ("patstat", "leipzig", "orgs"):
        name = "name" if "name" in fields else "affiliation"
        comps = [
            cl.JaroWinklerAtThresholds(name, [0.95, 0.9, 0.8]).configure(
                term_frequency_adjustments=True
            )
        ]
        if "coauthors" in fields:
            comps.append(cl.JaroWinklerAtThresholds("coauthors", [0.9, 0.7]))
        first = block_on(f"substr({name}, 1, 4)")
        return comps, [first, block_on(f"substr({name}, 5, 4)")], [first], [block_on(name)]
    if family == "restaurants":
        comps = [
            cl.JaroWinklerAtThresholds("name", [0.95, 0.88, 0.7]).configure(
                term_frequency_adjustments=True
            ),
            cl.JaroWinklerAtThresholds("addr", [0.95, 0.85]),
            cl.ExactMatch("city").configure(term_frequency_adjustments=True),
            cl.LevenshteinAtThresholds("phone", [1, 2]),
            cl.ExactMatch("type"),
        ]
        first = block_on("substr(name, 1, 4)")
        blocks = [block_on("phone"), first, block_on("city", "substr(addr, 1, 4)")]
        return comps, blocks, [block_on("city"), first], [block_on("phone")]
    given = next(
        f for f in ("given_name", "first_name", "fname_c1", "inventor_name_first") if f in fields
    )
    surname = next(
        f for f in ("surname", "last_name", "lname_c1", "inventor_name_last") if f in fields
    )
    dob = "dob" if "dob" in fields else ("date_of_birth" if "date_of_birth" in fields else None)
    comps = [
        cl.NameComparison(given).configure(term_frequency_adjustments=True),
        cl.NameComparison(surname).configure(term_frequency_adjustments=True),
    ]
    if dob:
        comps.append(
            cl.DateOfBirthComparison(dob, input_is_string=True, invalid_dates_as_null=True)
        )
    for f in (
        "suburb",
        "postcode",
        "state",
        "city",
        "zipcode",
        "sex",
        "country",
        "birth_year",
        "birth_month",
        "birth_day",
    ):
        if f in fields:
            comps.append(cl.ExactMatch(f).configure(term_frequency_adjustments=True))
    for f in ("address", "address_1", "street_name"):
        if f in fields:
            comps.append(cl.JaroWinklerAtThresholds(f, [0.95, 0.85]))
    if "email" in fields:
        comps.append(cl.EmailComparison("email"))
    for f in ("phone", "national_id", "soc_sec_id", "ssn"):
        if f in fields:
            comps.append(cl.LevenshteinAtThresholds(f, [1, 2]))
    place = next((f for f in ("postcode", "zipcode", "birth_year", "city") if f in fields), None)
    blocks = [block_on(given, surname)] + ([block_on(surname, place)] if place else [])
    blocks += [
        block_on(f)
        for f in (dob, "phone", "national_id", "soc_sec_id", "ssn", "email")
        if f and f in fields
    ]
    train = [block_on(dob)] if dob else ([block_on(place)] if place else [])
    train.append(block_on(given, surname))
    last = dob or place
    det = [block_on(given, surname, last)] if last else [block_on(given, surname)]
    return comps, blocks, train, det


# -- scoring and thresholds --------------------------------------------------------------------
def score(gold: list[str], pred: list[str], rows: np.ndarray | None = None) -> dict[str, float]:
    g, p = np.asarray(gold, dtype=object), np.asarray(pred, dtype=object)
    if rows is not None:
        g, p = g[rows], p[rows]
    pp, pr, pf = pairwise_prf(g.astype(str), p.astype(str))
    bp, br, bf = bcubed(g.astype(str), p.astype(str))
    return {
        "pairwise_p": pp,
        "pairwise_r": pr,
        "pairwise_f1": pf,
        "bcubed_p": bp,
        "bcubed_r": br,
        "bcubed_f1": bf,
    }


def _best(cut: Callable[[float], list[str]], gold: list[str], rows: Any = None) -> float:
    return float(max(GRID, key=lambda t: score(gold, cut(t), rows)["pairwise_f1"]))


def peer_figures(
    name: str,
    make: Callable[..., Callable[[float], list[str]]],
    system: str,
) -> dict[str, Any]:
    records, gold, meta = load(name)
    started = time.perf_counter()
    dayfirst = meta["family"] != "pseudopeople"  # US dates there
    cut = make(clean(records, dayfirst), meta["family"])
    seconds = time.perf_counter() - started
    if meta["family"] in SEEDED:  # the threshold from the tuning seed, same level
        tune_records, tune_gold, _ = load(name + "@tuning")
        t = _best(make(clean(tune_records, dayfirst), meta["family"]), tune_gold)
        return {**score(gold, cut(t)), "threshold": t, "seconds": seconds}
    return {**two_fold(cut, gold), "seconds": seconds}


def two_fold(cut: Callable[[float], list[Any]], gold: list[str]) -> dict[str, Any]:
    """The 2-fold protocol of a set without a tuning seed: the threshold best on one
    half of the entities (its records alone) scores the other half; the mean of the
    two. ``full_*``: every record at once at each half's threshold, the mean."""
    fold = folds(gold)
    out: dict[str, Any] = {}
    for k in (0, 1):
        t = _best(cut, gold, np.flatnonzero(fold == k))
        pred = cut(t)
        _add_half(out, score(gold, pred, np.flatnonzero(fold != k)))
        _add_half(out, {f"full_{key}": v for key, v in score(gold, pred).items()})
        out[f"threshold_{k}"] = t
    return out


def folds(gold: list[str]) -> np.ndarray:
    """(n,) 0 or 1: the 2-fold split by entity of the sets without a tuning seed."""
    return np.array([zlib.crc32(g.encode()) % 2 for g in gold])


def _add_half(out: dict[str, Any], half: dict[str, float]) -> None:
    for key, v in half.items():
        out[key] = out.get(key, 0.0) + v / 2


def er_figures(name: str) -> dict[str, Any]:
    """er's figures, scored as the peers are: on a set without a tuning seed, the mean
    of the two folds' scores (each fold's records alone, so a false merge across the
    folds counts in neither, as for the peers); ``full_*`` score every record at once,
    what a user gets."""
    records, gold, meta = load(name)
    started = time.perf_counter()
    pred, extra = run_er(records)
    seconds = time.perf_counter() - started
    if meta["family"] in SEEDED:
        return {**score(gold, pred), **extra, "seconds": seconds}
    full = {f"full_{key}": v for key, v in score(gold, pred).items()}
    return {**halves_score(gold, pred), **full, **extra, "seconds": seconds}


def halves_score(gold: list[str], pred: list[Any]) -> dict[str, float]:
    """The mean over the two folds (:func:`folds`) of ``score`` on each fold's records
    alone: how every system is scored on a set without a tuning seed."""
    out: dict[str, float] = {}
    fold = folds(gold)
    for k in (0, 1):
        _add_half(out, score(gold, pred, np.flatnonzero(fold != k)))
    return out


def er_dev_figures(name: str) -> dict[str, Any]:
    """er with its cut chosen by development labels, the peers' protocol on a set without
    a tuning seed: ingest with one fold's gold labels, ``er cut --gold``, score the other
    fold; the mean over the two folds. What a user with a labelled sample gets."""
    records, gold, meta = load(name)
    if meta["family"] in SEEDED:
        raise ValueError("a set with a tuning seed is scored at er's defaults (system er)")
    fold = folds(gold)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    for k in (0, 1):
        dev = [g if f == k else "" for g, f in zip(gold, fold, strict=True)]
        with tempfile.TemporaryDirectory() as tmp:
            er, env = _er_ingest(Path(tmp), records, dev)
            cut = subprocess.run(
                [*er, "cut", "--collection", "q", "--gold", "--json"],
                env=env,
                capture_output=True,
                text=True,
            )
            if cut.returncode:
                raise RuntimeError(cut.stderr[-2000:])
            pred, extra = _er_export(er, env, records)
        _add_half(out, score(gold, pred, np.flatnonzero(fold != k)))
        # what a user gets: every record at once, the false merges across halves too
        _add_half(out, {f"full_{key}": v for key, v in score(gold, pred).items()})
        out[f"threshold_{k}"] = round(json.loads(cut.stdout)["to"], 4)
    return {**out, **extra, "seconds": (time.perf_counter() - started) / 2}


def er_two_fold_figures(name: str) -> dict[str, Any]:
    """er under the peers' exact protocol on a set without a tuning seed: one ingest of
    the raw records, the hierarchy cut at each threshold of ``GRID`` (``er cut
    --threshold``, then ``er export entities``) and :func:`two_fold`, the same code that
    chooses a peer's threshold. ``seconds`` is the ingest's; ``sweep_seconds`` the cuts'."""
    records, gold, meta = load(name)
    if meta["family"] in SEEDED:
        raise ValueError("a set with a tuning seed is scored at er's defaults (system er)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        er, env = _er_ingest(Path(tmp), records)
        seconds = time.perf_counter() - started
        parts: dict[float, list[str]] = {}

        def cut(t: float) -> list[str]:
            if t not in parts:
                done = subprocess.run(
                    [*er, "cut", "--collection", "q", "--threshold", str(t), "--json"],
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if done.returncode:
                    raise RuntimeError(done.stderr[-2000:])
                parts[t] = _er_export(er, env, records)[0]
            return parts[t]

        out = two_fold(cut, gold)
    return {**out, "seconds": seconds, "sweep_seconds": time.perf_counter() - started - seconds}


SYSTEMS: dict[str, Callable[[str], dict[str, Any]]] = {
    "er": er_figures,
    "er-dev-cut": er_dev_figures,
    "er-2fold": er_two_fold_figures,
    "splink": lambda name: peer_figures(name, splink_scores, "splink"),
    "tfidf-hac": lambda name: peer_figures(name, lambda r, fam: tfidf_hac_tree(r), "tfidf-hac"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=["people-hard-10k"], choices=NAMES)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--json", type=Path, default=None, help="append one JSON row per figure")
    args = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    table = Table(title="quality, every record at once: pairwise P / R / F1, B-cubed F1, seconds")
    for col in ("set", "system", "pairwise P", "R", "F1", "B-cubed F1", "s", "note"):
        table.add_column(col)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    for name in args.sets:
        for system in args.systems:
            try:
                row = SYSTEMS[system](name)
            except Exception as exc:  # a peer that fails on a set is reported, not fatal
                row = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            note = row.get("error") or ", ".join(
                f"{k} {row[k]}"
                for k in ("threshold", "threshold_0", "threshold_1", "refused")
                if k in row
            )
            # the user's figure first: every record at once (full_*), where a set also has
            # the 2-fold halves' figures (those stay in the JSON rows)
            f = [
                f"{row.get('full_' + k, row.get(k)):.4f}" if k in row else "-"
                for k in ("pairwise_p", "pairwise_r", "pairwise_f1", "bcubed_f1")
            ]
            table.add_row(name, system, *f, f"{row.get('seconds', 0):.0f}", note)
            if args.json:
                with args.json.open("a") as out:
                    out.write(
                        json.dumps(
                            {
                                "set": name,
                                "system": system,
                                **row,
                                "machine": platform.processor() or platform.machine(),
                                "commit": commit,
                                "command": "python -m bench quality " + " ".join(sys.argv[1:]),
                            }
                        )
                        + "\n"
                    )
            Console().print(f"{name} {system}: {note or ''} " + " ".join(f))
    Console().print(table)


if __name__ == "__main__":
    main()
