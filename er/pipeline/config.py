"""A collection's config: defaults, the algorithm core it names, its featurizer."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, get_args

from er.cluster import MBSCC
from er.exceptions import ConfigError
from er.featurize import Featurizer, FeaturizerConfig, FieldTypes, infer_config
from er.match import PairModel
from er.match._views import free_text_only
from er.pipeline.schema import Algorithm, Candidates, Scoring, checked_config

DEFAULT_CUT = 0.5  # entity cut for collections whose config names none

# -- ingest and cluster (DESIGN §4 steps 1-2) ----------------------------------------------
DEFAULT_ALGORITHM = "mbscc"
# Entity cut of a collection scored by cosine (merges at linkage >= this score), chosen
# once on FEBRL3 with the default featurizer (bench/RESULTS.md "Featurizer dimension and
# entity cut"): pairwise F1 >= 0.998 from 0.40 to 0.50.
DEFAULT_ENTITY_CUT = 0.45
# Entity cut of a collection scored by its pair model: a match probability, which
# means the same in every collection (issue #29).
DEFAULT_PAIR_CUT = 0.5
# How candidate pairs are scored: "pair_model" (typed fields, Fellegi-Sunter weights,
# er.match; the default for records) or "cosine" (the vectors' cosine; the only choice
# for precomputed embeddings, and what collections made before the pair model keep).
SCORINGS: tuple[str, ...] = get_args(Scoring)
# LLAMA is a batch algorithm: the writer re-runs it over every point per batch (its
# partial_fit), keeping node ids by point set; fine up to some tens of thousands.
PIPELINE_ALGORITHMS: tuple[str, ...] = get_args(Algorithm)
# How a batch's candidate pairs are found (issue #30): "keys", records sharing a
# blocking key (er.ann.KeyIndex: a cost per record that does not grow with the
# collection), re-scored by the vectors' cosine; or "exact", the vectors' exact k-NN
# over every record (linear in the collection). Keys need typed fields, several of
# them: with one or two, a typo in one leaves no key to agree on, so such collections,
# cosine-scored ones and collections made before the keys search exactly; but free
# text alone in one or two fields (Leipzig's affiliation string) is searched by
# "words": exactly while a batch ends at EXACT_MAX records or fewer, then by the words
# and adjacent word pairs of its text (er.ann.text_keys), a string holding many words
# where a record holds one name. Exact search costs a batch O(n), 0.58 s per batch of
# 1,000 at 20,000 strings, the words 0.36 s at 20,000 and 0.48 s at 200,000 (bench/
# RESULTS.md, "Candidates for free text"), and up to EXACT_MAX the lists are what they
# were before the words (issue #56).
CANDIDATES: tuple[str, ...] = get_args(Candidates)
KEYED_MIN_FIELDS = 3
EXACT_MAX = 20_000


# A collection's core runs with these under its stored params, whatever the class's
# defaults: MBSCC's changed to SCC's first phase for clustering (issue #30), but
# every stored collection was built with these (the cosine entity cut 0.45 was chosen
# with them on FEBRL3, the pair model's floor and quality figures measured with them),
# and a stored config holds only the params it was given, so a replay must not move.
PIPELINE_PARAMS: dict[str, dict[str, Any]] = {
    "mbscc": {"linkage": "average", "schedule": "geometric", "n_levels": 30},
}


def _make_core(algorithm: str, params: dict[str, Any]) -> Any:
    """A fresh incremental core; one clear line for a bad name or parameter."""
    from er.cluster import Grinch, Llama
    from er.cluster._params import validate_params

    if algorithm not in PIPELINE_ALGORITHMS:
        raise ConfigError(
            f"collection config: algorithm must be one of {PIPELINE_ALGORITHMS}. Got {algorithm!r}."
        )
    if not isinstance(params, dict):
        raise ConfigError(f"collection config: params must be an object. Got {params!r}.")
    cls = {"mbscc": MBSCC, "grinch": Grinch, "llama": Llama}[algorithm]
    try:
        core = cls(**{**PIPELINE_PARAMS.get(algorithm, {}), **params})
    except TypeError as exc:
        raise ConfigError(f"collection config: {algorithm} params: {exc}") from None
    validate_params(core)
    return core


def new_collection_config(
    records: Sequence[Any],
    *,
    id_field: str,
    gold_field: str | None,
    given: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A collection's config: the given keys, the rest defaulted (featurizer inferred).

    Parameters
    ----------
    records : sequence
        The first batch (the featurizer is inferred from its object records).
    given : mapping, optional
        Any of :data:`CONFIG_KEYS`, checked by :class:`er.pipeline.schema.GivenConfig`;
        ``field_types`` may name some fields only (the rest are inferred). The trained
        pair model is added by the writer (``pair_model``).
    """
    given = checked_config({} if given is None else given)
    if "featurizer" in given:
        featurizer = FeaturizerConfig.from_json(given["featurizer"])
    else:
        objects = [r for r in records if isinstance(r, Mapping)]
        featurizer = infer_config(objects, id_field=id_field, gold_field=gold_field)
    algorithm = given.get("algorithm", DEFAULT_ALGORITHM)
    scoring = _scoring(given, featurizer)
    types = None
    if scoring == "pair_model":
        objects = [r for r in records if isinstance(r, Mapping)]
        names = [f.name for f in featurizer.fields]
        types = FieldTypes.infer(
            objects, names, given.get("field_types"), featurizer.max_field_chars
        )
    free_text = types is not None and free_text_only(types.kinds)
    cut = given.get("cut_threshold", _default_cut(scoring, free_text))
    params = given.get("params", _default_params(algorithm, scoring, free_text, float(cut)))
    _make_core(algorithm, params)
    out = {
        "id_field": id_field,
        "gold_field": gold_field,
        "featurizer": featurizer.to_json(),
        "algorithm": algorithm,
        "params": params,
        "cut_threshold": float(cut),
        "scoring": scoring,
    }
    if types is not None:
        out["field_types"] = types.to_json()
        if "featurizer" not in given:
            out["featurizer"] = _candidate_weights(featurizer, types.to_json()).to_json()
    out["candidates"] = _candidates(given, out.get("field_types"))
    if scoring == "pair_model" and not free_text:
        # equal scores ordered by their pair, not by point order (er.pipeline.scores);
        # free text keeps its ties: a level holds HAC's clusters at its threshold, and
        # copies of one string merge at once (MBSCC exact_levels)
        out["tie_break"] = "pair"
    return out


def _candidates(given: Mapping[str, Any], types: Mapping[str, str] | None) -> str:
    """The collection's candidate search (:data:`CANDIDATES`), checked or defaulted."""
    free_text = types is not None and free_text_only(list(types.values()))
    default = "exact"
    if types is not None and len(types) >= KEYED_MIN_FIELDS:
        default = "keys"
    elif free_text:
        default = "words"
    chosen = given.get("candidates", default)
    if chosen in ("keys", "words") and types is None:
        raise ConfigError(
            f'collection config: "candidates": "{chosen}" needs typed fields '
            '("scoring": "pair_model").'
        )
    if chosen == "words" and not free_text:
        raise ConfigError(
            'collection config: "candidates": "words" is for free text alone (a text field '
            "and no name, date, id, e-mail or phone: only the text gives keys)."
        )
    return str(chosen)


# Share of each field type in a pair-model collection's candidate vectors (the index
# proposes the pairs the model scores): a number or a description (patent classes, a
# co-author list) is shared by many entities, and at full weight pulls a record's
# neighbours towards records alike in it rather than in name (PATSTAT's firms beside
# their coordinates, co-authors and classes). Places stay at 1: without a date of birth
# or an id, FEBRL3's candidates need them. Fixed on the tuning sets, before the test
# data was read (bench/HISTORY.md, 2026-11-25).
CANDIDATE_WEIGHTS = {"number": 0.1, "text": 0.1}


def _candidate_weights(featurizer: FeaturizerConfig, types: Mapping[str, str]) -> FeaturizerConfig:
    """The inferred featurizer with each field weighted by its type (CANDIDATE_WEIGHTS;
    other types 1)."""
    fields = tuple(
        replace(spec, weight=CANDIDATE_WEIGHTS.get(types.get(spec.name, ""), 1.0))
        for spec in featurizer.fields
    )
    return replace(featurizer, fields=fields)


# The stored hierarchy of a pair-model collection stops at this match probability
# (MBSCC's tau_min; issue #30): a merge of clusters whose pairs are 5% likely matches
# on average says nothing about entities (cut at 0.5), and below it every batch would
# rewrite the few clusters that span everything: the floor shrinks a batch's graph
# write and leaves F1 as it was (bench/HISTORY.md, 2026-11-25). What stays apart hangs
# under one root of score 0: a cut above 0 but below the floor gives the floor's
# entities.
PAIR_FLOOR = 0.05


# A free-text collection (er.match._views: no name, date or id beside its text) is
# clustered by average linkage over each mention's FREE_TEXT_K nearest and, below,
# every pair of its components, not by the mean over the proposed pairs: its
# pair probabilities are soft (a pair of affiliations of one institute is 0.3 as often
# as 0.9), and the mean over the candidate pairs between two clusters, which ignores
# the pairs the index did not propose, chains institutes together (bench/RESULTS.md,
# "Free text alone: the pair model's views and the linkage (Leipzig)"). Sparse average
# counts a pair left out of the neighbours as no match, so an entity much larger than
# k is split: the larger k, the larger the entities one cut suits. k was chosen with
# the cut on two tuning sets of free text, before Leipzig went through the pipeline:
# PATSTAT's firm names ("patstat-names", entities of tens to hundreds of records) and
# FEBRL3's fields joined into one string ("febrl3-text", 1 to 5); a third came later,
# organisations that share their cities ("orgs-places", bench/orgs.py). EM trains on
# these candidates too, and PATSTAT's large firms need them deep (bench/HISTORY.md,
# 2026-11-26 and 2026-11-27).
FREE_TEXT_K = 100
# A component's every pair is scored (up to FREE_TEXT_COMPLETE mentions), not the
# lists' alone (MBSCC ``complete_max``, er.cluster._complete.complete_components):
# two clusters then link by the mean match probability of all their pairs whatever
# their sizes, and one cut suits small and large entities. A component's pairs grow
# with the square of its size: one of more than FREE_TEXT_COMPLETE mentions scores its
# lists' pairs and those two steps apart in them, as many as FREE_TEXT_COMPLETE
# mentions have at most, or its lists' pairs alone when they are more (4.5 million,
# 15-30 s of scoring per batch that touches it: bench/RESULTS.md, "Pair model: scoring
# cost"). Chosen with the cut on the three tuning sets (bench/HISTORY.md, 2026-11-27).
FREE_TEXT_COMPLETE = 3_000
# An entity larger than those pairs reach keeps many of its pairs unscored and is still
# split, so such a component is completed around the clusters at the collection's cut
# (MBSCC ``complete_at``, er.cluster._complete.Completion.refine): every pair inside
# one, and those of two whose linkage over all their pairs a probe puts near the cut;
# the rounds then run again. At FREE_TEXT_COMPLETE mentions or fewer nothing changes.
# Each level of a free-text hierarchy holds average-linkage HAC's clusters at its
# threshold (MBSCC ``exact_levels``): SCC's round joins whole chains of best
# neighbours at a level, past clusters whose linkage to the chain is under it. The cut
# is a match probability chosen on tuning data alone, by the mean of pairwise and
# B-cubed F1 over the four tuning seeds (the three sets and organisations at 10,000
# strings); above it organisations fall apart (bench/HISTORY.md, 2026-11-27). The
# model's few distinct probabilities tie often, and HAC's clusters then depend on the
# order of the ties: copies of one string merge at once (Agglomerator.merge_exact).
DEFAULT_FREE_TEXT_CUT = 0.45
# Past EXACT_MAX mentions, a batch that would re-derive more points than that is
# grafted (MBSCC ``graft_past``, er.cluster._graft): one floor component spans a
# free-text collection and its entities grow with it, so re-deriving what a batch
# touches grows with the collection (bench/RESULTS.md, "What a writer step re-derives
# as the collection grows"). Up to it, the hierarchy is the exact step's, as the lists
# are exact search's.
FREE_TEXT_GRAFT_PAST = EXACT_MAX


# Mean linkage over the proposed pairs alone joins what the model separates: a few
# pairs of two people score high (two inventors of one patent share its title, date,
# assignee and co-inventors; a sparse record bridges two people) while most of their
# pairs differ outright on a name. So a pair-model collection also scores every pair
# inside each component of the list edges at the entity cut (MBSCC
# ``complete_within``; such components hold an entity and its near misses, small on
# people, at most AGAINST_COMPLETE mentions scored in full) and adds the pairs that
# contradict a match (er.match._model.CONTRADICTION_BITS) to the pairs the mean runs over
# (``complete_against``); a pair merely short of evidence (a sparse record's) is left
# out as before. Chosen on PatentsView's inventors (its one use), the other sets held
# out (bench/RESULTS.md, "Entity resolution quality on held-out sets (issue #53)").
AGAINST_COMPLETE = 3_000


def _default_cut(scoring: str, free_text: bool) -> float:
    if scoring != "pair_model":
        return DEFAULT_ENTITY_CUT
    return DEFAULT_FREE_TEXT_CUT if free_text else DEFAULT_PAIR_CUT


def _default_params(
    algorithm: str, scoring: str, free_text: bool = False, cut: float = DEFAULT_FREE_TEXT_CUT
) -> dict[str, Any]:
    """MBSCC on a pair model's probabilities links clusters by the mean probability of
    the candidate pairs between them and of the pairs that contradict a match
    (AGAINST_COMPLETE): another pair the index did not propose is no evidence, where
    sparse average linkage counts it as a certain non-match and so cannot form an
    entity of more records than the index returns neighbours (PATSTAT's firms; on the
    hard people, pairwise recall 0.842 -> 0.982 at equal precision: bench/RESULTS.md,
    "Entity resolution quality"); it merges down to PAIR_FLOOR, and a batch redoes only
    the floor components it touches (``marking="components"``, issue #30: the same
    hierarchy as a whole re-run, at a cost that follows the batch)."""
    if algorithm != "mbscc" or scoring != "pair_model":
        return {}
    params: dict[str, Any] = {"linkage": "mean", "tau_min": PAIR_FLOOR, "marking": "components"}
    if not free_text:
        return {
            **params,
            "complete_max": AGAINST_COMPLETE,
            "complete_within": cut,
            "complete_against": True,
        }
    return {
        **params,
        "linkage": "average",
        "k": FREE_TEXT_K,
        "complete_max": FREE_TEXT_COMPLETE,
        "complete_at": cut,
        "exact_levels": True,
        "graft_past": FREE_TEXT_GRAFT_PAST,
    }


def _scoring(given: Mapping[str, Any], featurizer: FeaturizerConfig) -> str:
    scoring = given.get("scoring", "cosine" if featurizer.vector_field else "pair_model")
    if scoring == "pair_model" and featurizer.vector_field:
        raise ConfigError(
            "collection config: a precomputed-vector collection has no fields for a pair "
            'model; use "scoring": "cosine".'
        )
    if "field_types" in given and scoring != "pair_model":
        raise ConfigError('collection config: field_types apply to "scoring": "pair_model".')
    return str(scoring)


def field_types(config: Mapping[str, Any]) -> FieldTypes | None:
    """The collection's typed fields, or None for a cosine-scored collection."""
    if config.get("scoring") != "pair_model":
        return None
    fc = FeaturizerConfig.from_json(config["featurizer"])
    return FieldTypes(dict(config["field_types"]), max_chars=fc.max_field_chars)


def stored_model(config: Mapping[str, Any]) -> PairModel | None:
    """The collection's current pair model (None until the writer trained one)."""
    doc = config.get("pair_model")
    return None if doc is None else PairModel.from_json(doc)


def _settle_config(
    coll: Any, records: Sequence[Any], id_field: str, gold_field: str | None, given: Any
) -> dict[str, Any]:
    """The collection's stored config, created from this batch on first ingest."""
    if not coll.config.get("featurizer"):
        coll.config = new_collection_config(
            records, id_field=id_field, gold_field=gold_field, given=given
        )
        created: dict[str, Any] = coll.config
        return created
    stored: dict[str, Any] = coll.config
    if stored.get("id_field") != id_field:
        raise ConfigError(
            f"collection {coll.name!r} takes its ids from field {stored.get('id_field')!r}, "
            f"not {id_field!r}; pass --id-field {stored.get('id_field')}."
        )
    if gold_field is not None and gold_field != stored.get("gold_field"):
        # the gold field is read from every batch, and left out of the features, by the
        # name the first ingest gave: another name here would not be read as labels (and
        # was featurized as data if the first batch held it)
        named = stored.get("gold_field")
        raise ConfigError(
            f"collection {coll.name!r} "
            + (f"takes its gold labels from field {named!r}" if named else "has no gold field")
            + f", not {gold_field!r}; a collection's gold field is named at its first ingest"
            + (f" (pass --gold-field {named} or leave it out)." if named else " (leave it out).")
        )
    if given:
        fresh = new_collection_config(
            records, id_field=id_field, gold_field=gold_field, given=given
        )
        differs = [k for k in given if not _same(k, given[k], fresh.get(k), stored.get(k))]
        if differs:
            raise ConfigError(
                f"collection {coll.name!r} already has a config that differs in {differs}; "
                "a collection keeps its config (use a new collection"
                + ("; change its entity cut with er cut)." if "cut_threshold" in differs else ").")
            )
    return stored


def _same(key: str, given: Any, fresh: Any, stored: Any) -> bool:
    """Whether a given config value agrees with the stored one (field types: the ones
    named agree; the rest were inferred from another batch)."""
    if key == "field_types" and isinstance(given, Mapping) and isinstance(stored, Mapping):
        return all(stored.get(name) == kind for name, kind in given.items())
    return bool(fresh == stored)


_FEATURIZERS: dict[str, Featurizer] = {}


def _featurizer(config: Mapping[str, Any]) -> Featurizer:
    """One featurizer per config per process (its token cache only saves work)."""
    key = json.dumps(config["featurizer"], sort_keys=True)
    if key not in _FEATURIZERS:
        _FEATURIZERS[key] = Featurizer(FeaturizerConfig.from_json(config["featurizer"]))
    return _FEATURIZERS[key]


_COLLECTION_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def check_collection_name(name: str) -> str:
    """``name`` if it may name a new collection: letters, digits, ``.``, ``_`` and
    ``-``, not starting with a dot, at most 128 characters (it names a folder of the
    data dir: ``""``, ``"."`` and ``".."`` would share one or climb out of it)."""
    if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
        raise ConfigError(
            f"collection name {name!r}: use letters, digits, '.', '_' and '-' (not first "
            "a dot), at most 128 characters."
        )
    return name


def _safe(name: str) -> str:
    """A collection name as a folder name (hex-escaped beyond [A-Za-z0-9._-])."""
    return "".join(c if c.isalnum() or c in "._-" else f"%{ord(c):02x}" for c in name)
