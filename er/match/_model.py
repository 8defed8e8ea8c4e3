"""The pair model: Fellegi-Sunter log-odds over field comparison levels.

For a candidate pair with comparison levels l_f (one per field), the match weight is

    W = log2(prior / (1 - prior)) + sum_f log2(m_f[l_f] / u_f[l_f])

where m_f[l] = P(level l | match) and u_f[l] = P(level l | non-match) (Fellegi and
Sunter, 1969). A missing value (level 0) weighs 0. At the exact level the weight uses
the value's own frequency instead of the field's average u (term-frequency
adjustment): two records agreeing on a value v shared by a fraction tf(v) of records
are a coincidence with probability about tf(v), so the exact weight becomes
log2(m_f[exact] / tf(v)): a match on a rare surname counts more than on "Smith".
One more term, usually 0, corrects for fields that non-matches agree on together
(a household's surname, address and phone): the bits of the pair's agreement
pattern (er.match._dependence). The match probability is 2^W / (1 + 2^W).

Fields of a context type (free text, numbers, event dates: :data:`CONTEXT_KINDS`)
beside at least one identity field (a name, a birth date, an id, an e-mail, a phone)
are one-sided: they weigh at least 0 at every level. They describe a record's
circumstances, not the entity: one firm files patents from many sites, with many
teams, in many classes, and one inventor's patents carry many dates, so two of its
records disagreeing on co-authors, coordinates or dates is no evidence that they are
two, while agreeing on them is evidence that they are one. Two-sided, such fields
outweighed the name and EM's "match" class became the same patent team (PATSTAT;
bench/HISTORY.md). A collection of context fields alone (Leipzig's affiliation
strings), or beside places and categories only, has nothing else to tell
entities apart, and keeps them two-sided.

A model is frozen once trained and stored with the collection as JSON; the same
pairs always get the same scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from er.match._compare import LADDERS, compare_field, compare_views
from er.match._dependence import (
    dependence_bits,
    households_seen,
    shared_block,
    shared_once,
)
from er.match._table import FieldTable
from er.match._views import IDENTITY_KINDS, View, dates_apart

__all__ = [
    "CONTEXT_KINDS",
    "CONTRADICTION_BITS",
    "FieldWeights",
    "PairModel",
    "level_bits",
    "one_sided_fields",
]

MAX_TF_BONUS = 10.0  # bits a rare value may add over the field's average exact weight
# A pair contradicts a match when the fields that name the entity itself (a person's
# name, a date, an identifier: CONTRADICTING_KINDS) weigh this many bits or more
# against it together: matches show those levels at least 2^6 = 64 times less often
# than non-matches (two given names that differ outright; or a given name and an id
# that differ, as twins' do). Summed, not the worst field alone: an id's "far" is
# counted from 1-2% of matches, about -6 bits, and which side of the threshold EM
# puts it then decides alone whether twins contradict (people hard 10k / 100k: -6.19 /
# -5.00; bench/RESULTS.md, "Entity resolution quality on held-out sets (issue #53)").
# A field weighing for the match offsets none of the others. Places and categories are
# circumstances, which change (people move); organisation names are not read either:
# one firm files under spellings a string comparison calls different ("GISTBROCADES
# B.V.", "GIST-BROCADES N.V."), under its subsidiaries and its initials. Such pairs
# are what an entity must not be joined across (PairModel.against; the hierarchy's
# use: er.pipeline.config, bench/RESULTS.md "Entity resolution quality on held-out
# sets (issue #53)").
CONTRADICTION_BITS = 6.0
CONTRADICTING_KINDS = frozenset({"person_name", "date", "identifier"})
CONTEXT_KINDS = frozenset({"text", "number", "event_date"})  # one-sided evidence (module docstring)
# IDENTITY_KINDS: what names an entity on its own; a place, a postcode or a category
# beside a text field (a product title and its country) leaves the text the identity,
# two-sided


def one_sided_fields(kinds: Sequence[str]) -> list[bool]:
    """Which fields are one-sided: the context fields, when an identity field
    (:data:`IDENTITY_KINDS`) is beside them (module docstring)."""
    identity = any(k in IDENTITY_KINDS for k in kinds)
    return [identity and k in CONTEXT_KINDS for k in kinds]


def level_bits(
    m: Sequence[float] | NDArray[np.float64],
    u: Sequence[float] | NDArray[np.float64],
    one_sided: bool = False,
) -> NDArray[np.float64]:
    """(n_levels,) a field's weight per level, log2(m / u): 0 for missing, and at least
    0 at every level of a one-sided field."""
    w = np.log2(np.asarray(m, np.float64) / np.asarray(u, np.float64))
    w[0] = 0.0
    if one_sided:
        np.maximum(w, 0.0, out=w)
    return np.asarray(w, np.float64)


@dataclass(frozen=True)
class FieldWeights:
    """The trained parameters of one field.

    Attributes
    ----------
    name, kind : str
        Field name and type (a key of :data:`er.match.LADDERS`).
    m, u : tuple of float, length n_levels
        P(level | match) and P(level | non-match); index 0 (missing) is unused.
    tf : mapping of str to float
        Relative frequency of each value seen at least twice in the training sample.
    tf_floor : float or None
        Frequency of any other value (one over the non-missing training values);
        None: no term-frequency adjustment for this field.
    one_sided : bool
        A context field beside identity fields: no level weighs below 0 (module
        docstring).
    source : str or None
        The record field a view of free text compares (er.match._views); None: the
        field ``name`` itself.
    df : mapping of str to float
        A view's frozen document frequencies (er.match._views.document_frequencies).
    df_floor : float or None
        The document frequency of any gram or word not in ``df``.
    undated : bool
        A view that reads its strings without their dates (er.match._views.WITHOUT_DATES;
        a view fitted before that rule, 2026-12-04, reads whole strings).
    """

    name: str
    kind: str
    m: tuple[float, ...]
    u: tuple[float, ...]
    tf: Mapping[str, float] = field(default_factory=dict)
    tf_floor: float | None = None
    one_sided: bool = False
    source: str | None = None
    df: Mapping[str, float] = field(default_factory=dict)
    df_floor: float | None = None
    undated: bool = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle, a field pickled before the views of free text included (a writer's
        checkpoint): it gets their defaults, as :meth:`PairModel.from_json` gives."""
        defaults: dict[str, Any] = {"source": None, "df": {}, "df_floor": None, "undated": False}
        self.__dict__.update({**defaults, **state})

    @property
    def view(self) -> View:
        """The view of free text this field is (er.match._views.view_levels)."""
        return self.kind, self.df, self.df_floor, self.undated

    @property
    def column(self) -> str:
        """The record field this one compares."""
        return self.source if self.source is not None else self.name

    def level_weights(self) -> NDArray[np.float64]:
        """(n_levels,) log2(m / u) per level (:func:`level_bits`)."""
        return level_bits(self.m, self.u, self.one_sided)

    def tf_bonus(self, values: Sequence[str]) -> NDArray[np.float64]:
        """(len(values),) bits added at the exact level for each value:
        log2(u[exact] / tf(value)), within +-MAX_TF_BONUS."""
        if self.tf_floor is None:
            return np.zeros(len(values))
        floor = self.tf_floor
        tf = np.array([self.tf.get(v, floor) for v in values], np.float64)
        bonus = np.log2(self.u[-1] / np.maximum(tf, floor))
        return np.clip(bonus, -MAX_TF_BONUS, MAX_TF_BONUS)


@dataclass(frozen=True)
class PairModel:
    """A frozen Fellegi-Sunter model over typed fields.

    Attributes
    ----------
    fields : tuple of FieldWeights
    prior : float
        P(match) for a random pair of the training sample (er.match._train).
    version : int
        1 for a collection's first model; each retraining adds one.
    method : {"em", "gold", "prior"}
        m estimated without labels (EM), counted from gold labels, or the starting m
        where EM found no plausible fit (u is estimated in every case).
    n_train : int
        Records in the training sample.
    dependence : mapping of int to float
        Bits added to pairs of each agreement pattern that non-matches show far
        more often than independent fields would (households; er.match._dependence).
    temperature : float
        The match weight is divided by it before the logistic (1: none). A model of
        free text in views takes er.match._views.VIEW_TEMPERATURE: its views read one
        string's evidence several times over, and their sum overstates it.
    """

    fields: tuple[FieldWeights, ...]
    prior: float
    version: int = 1
    method: str = "em"
    n_train: int = 0
    dependence: Mapping[int, float] = field(default_factory=dict)
    temperature: float = 1.0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def compares_views(self) -> bool:
        """Whether the model compares free text in views (er.match._views)."""
        return any(f.source is not None for f in self.fields)

    def levels(
        self, table: FieldTable, left: NDArray[np.int64], right: NDArray[np.int64]
    ) -> NDArray[np.int8]:
        """(p, n_fields) comparison level of each pair in each field (the views of one
        free-text field compared together: their value pairs and words gathered once)."""
        codes = table.codes
        out = np.empty((left.size, len(self.fields)), np.int8)
        views: dict[int, list[int]] = {}  # column -> its view fields
        for f, (fw, c) in enumerate(zip(self.fields, self.columns(table), strict=True)):
            if fw.source is not None:
                views.setdefault(c, []).append(f)
                continue
            a, b = codes[left, c].astype(np.int64), codes[right, c].astype(np.int64)
            out[:, f] = compare_field(fw.kind, table.vocab[c], a, b, fw.df, fw.df_floor)
        for c, fs in views.items():
            specs = [self.fields[f].view for f in fs]
            a, b = codes[left, c].astype(np.int64), codes[right, c].astype(np.int64)
            out[:, fs] = compare_views(specs, table.vocab[c], a, b)
        return out

    def columns(self, table: FieldTable) -> list[int]:
        """The table column each field compares (views of free text share theirs)."""
        return [table.fields.index(fw.column) for fw in self.fields]

    def weights(
        self, table: FieldTable, left: NDArray[np.int64], right: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        """Per-field weights (bits) of each pair, and the levels behind them.

        Returns
        -------
        weights : ndarray of float64, shape (p, n_fields)
        levels : ndarray of int8, shape (p, n_fields)
        """
        levels = self.levels(table, left, right)
        out = np.empty(levels.shape, np.float64)
        codes = table.codes
        for f, (fw, c) in enumerate(zip(self.fields, self.columns(table), strict=True)):
            out[:, f] = fw.level_weights()[levels[:, f]]
            exact = np.flatnonzero(levels[:, f] == len(fw.m) - 1)
            if exact.size and fw.tf_floor is not None:  # each distinct value looked up once
                values, at = np.unique(codes[left[exact], c], return_inverse=True)
                bonus = fw.tf_bonus([table.vocab[c][v] for v in values])
                # log2(m / tf(v)), one-sided after the value's frequency is in
                w = level_bits(fw.m, fw.u)[-1] + bonus[at.ravel()]
                out[exact, f] = np.maximum(w, 0.0) if fw.one_sided else w
        return out, levels

    def prior_at(self, population: int | None = None) -> float:
        """P(match) for a random pair of ``population`` records.

        A collection's duplicates per record stay about constant as it grows, while
        its pairs grow with the square: the random-pair prior falls as 1/(n - 1). The
        trained prior holds for the training sample (``n_train`` records); a larger
        collection scales it down (never up: None or fewer records keep it).
        """
        if population is None or population <= self.n_train or self.n_train < 2:
            return self.prior
        duplicates = self.prior * (self.n_train - 1)  # per record
        return float(np.clip(duplicates / (population - 1), 1e-12, 0.5))

    def match_weight(
        self,
        table: FieldTable,
        left: NDArray[np.int64],
        right: NDArray[np.int64],
        population: int | None = None,
    ) -> NDArray[np.float64]:
        """(p,) total match weight W in bits (module docstring), with the dependence
        correction of the pair's agreement pattern, for pairs of a collection of
        ``population`` records (:meth:`prior_at`)."""
        w, levels = self.weights(table, left, right)
        return self._total(w, levels, population)

    def _total(
        self, w: NDArray[np.float64], levels: NDArray[np.int8], population: int | None
    ) -> NDArray[np.float64]:
        """(p,) match weights from the per-field weights and levels, each (p, n_fields)."""
        prior = _logit2(self.prior_at(population))
        total = prior + self._summed(w, levels)
        if not self.compares_views:
            return total
        kinds = [(fw.kind, fw.source) for fw in self.fields]
        sides = [fw.one_sided for fw in self.fields]
        undated = [fw.undated for fw in self.fields]
        return dates_apart(total, w, levels, kinds, self.temperature, sides, undated)

    def _summed(self, w: NDArray[np.float64], levels: NDArray[np.int8]) -> NDArray[np.float64]:
        """(p,) the fields' weights summed, households' shared fields counted once."""
        return shared_once(w, self.counted_once(), dependence_bits(self.dependence, levels))

    def _tempered(self, weight: NDArray[np.float64]) -> NDArray[np.float64]:
        """(p,) match probabilities of match weights (p,) taken over the temperature."""
        return _probability(weight / self.temperature)

    def counted_once(self) -> list[int]:
        """The fields a household shares, counted as one piece of evidence where the
        training sample showed households (er.match._dependence.households_seen); []
        where it did not."""
        kinds = [fw.kind for fw in self.fields]
        return shared_block(kinds) if households_seen(self.dependence, kinds) else []

    def against(
        self,
        table: FieldTable,
        left: NDArray[np.int64],
        right: NDArray[np.int64],
        population: int | None = None,
    ) -> NDArray[np.float64]:
        """(p,) the match probability of each pair that contradicts a match (its fields of
        CONTRADICTING_KINDS weighing CONTRADICTION_BITS or more against it, summed over
        those weighing against), NaN for every other pair."""
        w, levels = self.weights(table, left, right)
        p = self._tempered(self._total(w, levels, population))
        named = [f for f, fw in enumerate(self.fields) if fw.kind in CONTRADICTING_KINDS]
        held = np.minimum(w[:, named], 0.0).sum(axis=1) <= -CONTRADICTION_BITS
        return np.where(held, p, np.nan)

    def probability(
        self,
        table: FieldTable,
        left: NDArray[np.int64],
        right: NDArray[np.int64],
        population: int | None = None,
    ) -> NDArray[np.float64]:
        """(p,) match probability of each pair (in a collection of ``population``)."""
        return self._tempered(self.match_weight(table, left, right, population))

    def explain(
        self, table: FieldTable, a: int, b: int, population: int | None = None
    ) -> dict[str, Any]:
        """The model's own reasons for one pair, as ``er query explain`` and the
        evaluation report show them: each field's values, comparison level and weight
        (``fields``), the prior's and the dependence correction's bits, the total
        ``match_weight`` and the ``probability`` (in a collection of ``population``)."""
        w, lv = self.weights(table, np.array([a]), np.array([b]))
        total = float(self._total(w, lv, population)[0])
        prior = _logit2(self.prior_at(population))
        summed = float(self._summed(w, lv)[0])
        va, vb = table.values(a), table.values(b)
        fields = [
            {
                "field": fw.name,
                "column": fw.column,
                "type": fw.kind,
                "a": va[fw.column],
                "b": vb[fw.column],
                "level": LADDERS[fw.kind].names[int(lv[0, f])],
                "weight": float(w[0, f]),
            }
            for f, fw in enumerate(self.fields)
        ]
        return {
            "fields": fields,
            "prior_weight": prior,
            # the learned correction and the shared fields counted once (shared_once)
            "dependence_weight": summed - float(w.sum()),
            # a string's views counted once where its dates differ (dates_apart)
            "dates_apart": total - (prior + summed),
            "match_weight": total,
            "temperature": self.temperature,
            "probability": float(self._tempered(np.array([total]))[0]),
        }

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored with the collection."""
        return {
            "prior": self.prior,
            "version": self.version,
            "method": self.method,
            "n_train": self.n_train,
            "dependence": {str(k): v for k, v in sorted(self.dependence.items())},
            "temperature": self.temperature,
            "fields": [
                {
                    "name": f.name,
                    "kind": f.kind,
                    "m": list(f.m),
                    "u": list(f.u),
                    "tf": dict(sorted(f.tf.items())),
                    "tf_floor": f.tf_floor,
                    "one_sided": f.one_sided,
                    **_view_json(f),
                }
                for f in self.fields
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PairModel:
        """Inverse of :meth:`to_json`."""
        fields = tuple(
            FieldWeights(
                name=f["name"],
                kind=f["kind"],
                m=tuple(f["m"]),
                u=tuple(f["u"]),
                tf=dict(f["tf"]),
                tf_floor=f["tf_floor"],
                # models stored before one-sided fields weigh every field both ways
                one_sided=bool(f.get("one_sided", False)),
                # models stored before the views of free text have none
                source=f.get("source"),
                df=dict(f.get("df", {})),
                df_floor=f.get("df_floor"),
                undated=bool(f.get("undated", False)),
            )
            for f in doc["fields"]
        )
        return cls(
            fields=fields,
            prior=doc["prior"],
            version=doc["version"],
            method=doc["method"],
            n_train=doc["n_train"],
            # models stored before the correction have none
            dependence={int(k): float(v) for k, v in doc.get("dependence", {}).items()},
            # models stored before the temperature have none
            temperature=float(doc.get("temperature", 1.0)),
        )


def _view_json(f: FieldWeights) -> dict[str, Any]:
    """A view's own keys (none for a plain field: its stored form as before views)."""
    if f.source is None:
        return {}
    out = {"source": f.source, "df": dict(sorted(f.df.items())), "df_floor": f.df_floor}
    return {**out, "undated": True} if f.undated else out


def _probability(weight: NDArray[np.float64]) -> NDArray[np.float64]:
    """(p,) match probabilities 2^W / (1 + 2^W) of match weights W (p,) in bits."""
    return np.asarray(1.0 / (1.0 + np.exp2(-weight)), np.float64)


def _logit2(p: float) -> float:
    return float(np.log2(p / (1.0 - p)))
