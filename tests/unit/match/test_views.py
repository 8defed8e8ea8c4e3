"""Free text in views: the 3-gram cosine against scikit-learn's TF-IDF, the word
views against their definitions, EM finding a fit where one comparison found none, and
the views stored and scored alike after a JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer

from er.match import FieldTable, PairModel, compare_field, train_pair_model
from er.match._views import (
    VIEW_TEMPERATURE,
    document_frequencies,
    free_text_only,
    model_fields,
)
from tests._affiliations import affiliations

_words = st.text(alphabet="abcde12", min_size=1, max_size=7)
_texts = st.lists(_words, min_size=1, max_size=5).map(" ".join)


def _codes(values: list[str]) -> tuple[list[str], np.ndarray]:
    vocab = sorted(set(values))
    return vocab, np.array([vocab.index(v) for v in values], np.int64)


@settings(max_examples=150, deadline=None)
@given(st.lists(_texts, min_size=2, max_size=12), st.data())
def test_gram_levels_are_sklearns_tfidf_cosine_levels(values: list[str], data) -> None:  # type: ignore[no-untyped-def]
    """Document frequencies counted on the same records, the view's cosine is
    scikit-learn's (char_wb 3-grams, idf ln(n / df) + 1, l2 rows) cut at 0.4/0.6/0.8."""
    df, floor = document_frequencies("text_grams", values)
    X = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(3, 3), smooth_idf=False, lowercase=False
    ).fit_transform(values)
    n = len(values)
    a = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))
    b = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=a.size, max_size=a.size)))
    cos = np.asarray(X[a].multiply(X[b]).sum(axis=1)).ravel()
    near = np.isclose(cos[:, None], [0.4, 0.6, 0.8], atol=1e-9).any(axis=1)
    want = 1 + np.digitize(cos, [0.4, 0.6, 0.8])
    vocab, codes = _codes(values)
    got = compare_field("text_grams", vocab, codes[a], codes[b], df, floor)
    assert (got[~near] == want[~near]).all()


@settings(max_examples=150, deadline=None)
@given(st.lists(_texts, min_size=2, max_size=10), st.data())
def test_word_views_are_symmetric_and_equal_text_is_their_top(values: list[str], data) -> None:  # type: ignore[no-untyped-def]
    n = len(values)
    a = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))
    b = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=a.size, max_size=a.size)))
    vocab, codes = _codes(values)
    for kind, top in (("text_grams", 4), ("text_share", 4), ("text_rarest", 3)):
        df, floor = document_frequencies(kind, values)
        ab = compare_field(kind, vocab, codes[a], codes[b], df, floor)
        ba = compare_field(kind, vocab, codes[b], codes[a], df, floor)
        assert (ab == ba).all()
        same = codes[a] == codes[b]
        if kind == "text_share":  # words in every record weigh 0: no evidence
            every = {w for w, share in df.items() if share == 1.0}
            light = np.array([set(v.split()) <= every for v in vocab])
            none = light[codes[a]] | light[codes[b]]
            assert (ab[none] == 0).all()
            same, ab = same[~none], ab[~none]
        assert (ab[same] == top).all() and (ab >= 1).all()


def test_word_views_by_their_definitions() -> None:
    """Sample of four records: "leipzig" is in one (idf ln 4), "univ" in all (ln 1 = 0)."""
    values = ["univ leipzig 04109", "univ dresden", "univ mainz 55122", "univ mainz"]
    vocab, codes = _codes(values)
    df, floor = document_frequencies("text_share", values)
    assert df == {"univ": 1.0, "mainz": 0.5} and floor == 0.25
    a, b = codes[[0, 1, 2, 2]], codes[[1, 3, 3, 0]]
    # shared rare weight / the rarer side's: univ alone (0) -> far; mainz, all of "univ
    # mainz" -> top
    assert compare_field("text_share", vocab, a, b, df, floor).tolist() == [1, 1, 4, 1]
    # rarest words: leipzig | dresden, dresden | mainz, 55122 | mainz (in both), 55122 | leipzig
    assert compare_field("text_rarest", vocab, a, b, df, floor).tolist() == [1, 1, 2, 1]
    # numbers: missing when a side has none; 55122 against 04109 differ
    assert compare_field("text_numbers", vocab, a, b).tolist() == [0, 0, 0, 1]
    assert compare_field("text_numbers", vocab, codes[[2]], codes[[2]]).tolist() == [2]


def test_only_free_text_without_an_identity_field_gets_views() -> None:
    assert free_text_only(["text"]) and free_text_only(["text", "place", "number"])
    assert not free_text_only(["org_name", "text"]) and not free_text_only(["place"])
    assert model_fields(["aff", "city"], ["text", "place"]) == [
        ("aff", "text_grams", "aff"),
        ("aff:share", "text_share", "aff"),
        ("aff:rarest", "text_rarest", "aff"),
        ("aff:numbers", "text_numbers", "aff"),
        ("aff:dates", "text_dates", "aff"),
        ("city", "place", None),
    ]
    assert model_fields(["name", "aff"], ["org_name", "text"]) == [
        ("name", "org_name", None),
        ("aff", "text", None),
    ]


def test_em_finds_a_fit_on_free_text_and_its_probability_ranks_matches_first() -> None:
    """One comparison of the string alone gave EM no plausible fit (method "prior");
    its views give one, under which every pair of one institute outranks most pairs of
    two (area under the ROC against the gold labels)."""
    texts, gold = affiliations(12, 0)
    table = FieldTable(["aff"])
    table.add([[t] for t in texts])
    n = len(texts)
    i, j = np.triu_indices(n, 1)
    model = train_pair_model(table, ["text"], (i.astype(np.int64), j.astype(np.int64)))
    assert model.method == "em" and len(model.fields) == 5
    assert model.temperature == VIEW_TEMPERATURE  # a typed model's is 1 (test_model)
    p = model.probability(table, i.astype(np.int64), j.astype(np.int64))
    same = np.asarray(gold)[i] == np.asarray(gold)[j]
    ranks = np.argsort(np.argsort(p)) + 1.0
    auc = (ranks[same].sum() - same.sum() * (same.sum() + 1) / 2) / (same.sum() * (~same).sum())
    assert auc > 0.95
    again = PairModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again == model
    assert np.array_equal(again.probability(table, i, j), p)
    explained = model.explain(table, 0, 1)
    assert [f["field"] for f in explained["fields"]] == [
        "aff",
        "aff:share",
        "aff:rarest",
        "aff:numbers",
        "aff:dates",
    ]
    assert explained["fields"][1]["a"] == texts[0]
    assert explained["probability"] == pytest.approx(p[0])


def test_a_pairs_levels_and_weights_are_the_same_bits_whatever_else_is_scored() -> None:
    """The writer scores a batch's candidates, explain one pair, confidence an entity's
    pairs: the same pair must get the same probability, to the bit, in each."""
    texts, _ = affiliations(6, 3)
    table = FieldTable(["aff"])
    table.add([[t] for t in texts])
    i, j = np.triu_indices(len(texts), 1)
    model = train_pair_model(table, ["text"], (i.astype(np.int64), j.astype(np.int64)))
    everything = model.probability(table, i.astype(np.int64), j.astype(np.int64))
    for k in (0, 7, 100, len(i) - 1):
        alone = model.probability(table, i[[k]].astype(np.int64), j[[k]].astype(np.int64))
        assert alone[0] == everything[k]


def test_fields_pickled_before_the_views_load_and_score() -> None:
    """A writer's checkpoint holds its model pickled: a field saved before the views had
    no source, df or df_floor, and must load as a plain field."""
    import pickle

    from er.match import FieldWeights

    field = FieldWeights(
        "name", "org_name", m=(1, 0.1, 0.1, 0.1, 0.7), u=(1, 0.9, 0.05, 0.04, 0.01)
    )
    old = {k: v for k, v in vars(field).items() if k not in ("source", "df", "df_floor")}

    class Saved:  # pickles as the FieldWeights of before, with the state it had
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return object.__new__, (FieldWeights,), old

    again = pickle.loads(pickle.dumps(Saved()))
    assert again == field
    table = FieldTable(["name"])
    table.add([["acme"], ["acme"], ["zeta"]])
    model = PairModel(fields=(again,), prior=0.1)
    assert model.probability(table, np.array([0, 0]), np.array([1, 2])).tolist() == (
        PairModel(fields=(field,), prior=0.1)
        .probability(table, np.array([0, 0]), np.array([1, 2]))
        .tolist()
    )


def test_the_reports_deciding_link_shows_every_view() -> None:
    from er.cluster import SCC
    from er.evaluation import coreference_report
    from er.pipeline.worst import deciding_link
    from er.reports import render_report

    texts, _ = affiliations(6, 3)
    table = FieldTable(["aff"])
    table.add([[t] for t in texts])
    i, j = np.triu_indices(len(texts), 1)
    model = train_pair_model(table, ["text"], (i.astype(np.int64), j.astype(np.int64)))
    ids = [f"r{k}" for k in range(len(texts))]
    sides = np.arange(len(texts)) % 2  # every pair of an even and an odd record is a link
    link = deciding_link(model, table, ids, sides, len(texts))
    left, right = i[sides[i] != sides[j]], j[sides[i] != sides[j]]
    best = model.probability(table, left.astype(np.int64), right.astype(np.int64)).max()
    assert link is not None and link["probability"] == best  # brute force over the links
    X = np.random.default_rng(0).normal(size=(len(texts), 4)).astype(np.float32)
    run = {
        "id": 1,
        "collection": "c",
        "created_at": "now",
        "as_of_seq": 1,
        "algorithm": "mbscc",
        "metrics": coreference_report(SCC(k=3).fit(X).hierarchy_, sides, threshold=0.5),
    }
    link.update(meaning="the strongest link", considered=2)
    error = {"title": "entity 1", "size": 2, "parts": 2, "lineage": "", "link": link}
    error["records"] = [{"id": x, "gold": "g", "entity": 1, "excerpt": ""} for x in ids[:2]]
    html = render_report(run, [run], errors={"false_merges": [error], "splits": []})
    for reason in link["fields"]:
        assert f"<th>{reason['field']}</th>" in html
        assert f"{reason['weight']:+.2f}" in html


def test_a_retrained_model_compares_free_text_as_the_model_it_replaces() -> None:
    """A free-text collection made before the views has one comparison per text field,
    and the mean linkage and cut chosen for it; its retraining (``er train``, or the
    writer's at 10,000 mentions) must not turn that into views under the old linkage."""
    from er.pipeline.train import train_on_collection

    texts, _ = affiliations(6, 1)
    table = FieldTable(["aff"])
    table.add([[t] for t in texts])
    X = np.random.default_rng(0).normal(size=(len(texts), 8)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    config = {"field_types": {"aff": "text"}}
    fresh = train_on_collection(table, config, X, 1)
    assert [f.kind for f in fresh.fields] == [
        "text_grams",
        "text_share",
        "text_rarest",
        "text_numbers",
        "text_dates",
    ]
    n = len(texts)
    i, j = (a.astype(np.int64) for a in np.triu_indices(n, 1))
    old = train_pair_model(table, ["text"], (i, j), views=False)  # before the views
    assert [f.kind for f in old.fields] == ["text"]
    again = train_on_collection(table, config, X, 2, held=old)
    assert [f.kind for f in again.fields] == ["text"] and again.version == 2
    assert len(train_on_collection(table, config, X, 3, held=fresh).fields) == 5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), _texts), _texts), min_size=3, max_size=14),
    st.data(),
)
def test_views_compared_together_are_each_views_own_levels(rows, data) -> None:  # type: ignore[no-untyped-def]
    """PairModel.levels compares a field's views together (one gathering of value pairs
    and words, per text column): the same levels as each view compared alone by
    compare_field, two text fields (one with gaps) side by side."""
    t = FieldTable(["dept", "place"])
    t.add([list(r) for r in rows])
    n = len(rows)
    model = train_pair_model(t, ["text", "text"], (np.array([0]), np.array([1])), views=True)
    assert len(model.fields) == 10
    a = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=30)))
    b = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=a.size, max_size=a.size)))
    alone = np.column_stack(
        [
            compare_field(
                fw.kind,
                t.vocab[c],
                t.codes[a, c].astype(np.int64),
                t.codes[b, c].astype(np.int64),
                fw.df,
                fw.df_floor,
                fw.undated,
            )
            for fw, c in zip(model.fields, model.columns(t), strict=True)
        ]
    )
    assert np.array_equal(model.levels(t, a, b), alone)
