"""One evaluation run as a self-contained HTML page: figures, plots, worst errors.

The page is rendered from ``templates/report.html.j2`` with autoescaping: every record
value, id and name is escaped by the template, never by hand. Plots are matplotlib
figures embedded as inline SVG; the page loads nothing from the network (no scripts,
fonts or styles from elsewhere), so it opens offline and can be attached to a ticket as
one file.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

__all__ = ["HEADLINE", "render_report"]

#: Headline figures: (label, key in the metrics dict, index in a [p, r, f1] list or None).
HEADLINE: tuple[tuple[str, str, int | None], ...] = (
    ("pairwise F1", "pairwise_prf_at_cut", 2),
    ("pairwise precision", "pairwise_prf_at_cut", 0),
    ("pairwise recall", "pairwise_prf_at_cut", 1),
    ("B-cubed F1", "bcubed_at_cut", 2),
    ("MUC F1", "muc_at_cut", 2),
    ("CEAF-e F1", "ceaf_e_at_cut", 2),
    ("CoNLL F1", "conll_f1_at_cut", None),
    ("dendrogram purity", "dendrogram_purity", None),
    ("best Jaccard per mention (Jacc/pt)", "jacc_pt", None),
    ("entities", "n_entities", None),
)

#: Each headline figure in words (by its label).
MEANING: dict[str, str] = {
    "pairwise F1": "harmonic mean of pairwise precision and recall",
    "pairwise precision": "of the record pairs put in one entity, the share that are one "
    "gold entity",
    "pairwise recall": "of the record pairs of one gold entity, the share put in one entity",
    "B-cubed F1": "per record, the share of its entity that is its gold entity and the "
    "reverse, averaged over records; their harmonic mean",
    "MUC F1": "how few links must be added or cut to turn the entities into the gold ones",
    "CEAF-e F1": "how well entities pair one to one with gold entities, by their overlap",
    "CoNLL F1": "mean of MUC, B-cubed and CEAF-e F1",
    "dendrogram purity": "for two records of one gold entity, the share of that entity in "
    "the smallest cluster of the hierarchy holding both (any cut), averaged",
    "best Jaccard per mention (Jacc/pt)": "for each gold entity, the hierarchy's cluster "
    "closest to it by Jaccard (any cut); averaged over records",
    "entities": "entities at the cut (gold: in the header above)",
}

PAGE = 20  # records of an error shown at once; the rest in folded pages of as many

_ERROR_KINDS = (
    (
        "false_merges",
        "Largest false merges",
        "false-merges",
        "gold entities",
        "Predicted entities that hold records of several gold entities, most gold entities first.",
    ),
    (
        "splits",
        "Largest splits",
        "splits",
        "predicted entities",
        "Gold entities whose records are in several predicted entities, most parts first.",
    ),
)


def headline_value(metrics: Mapping[str, Any], key: str, index: int | None) -> float | None:
    """A headline figure of a metrics dict, or None when the run has none."""
    value = metrics.get(key)
    if value is None:
        return None
    return float(value[index] if index is not None else value)


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: inline SVG


def _figure() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "er"  # same figure, same bytes
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5.2, 3.4))


def _sweep_plot(metrics: Mapping[str, Any]) -> str:
    fig, ax = _figure()
    sweep = metrics.get("sweep", [])
    t = [row["threshold"] for row in sweep]
    for name in ("precision", "recall", "f1"):
        ax.plot(t, [row[name] for row in sweep], marker=".", label=name)
    ax.axvline(metrics["threshold"], color="k", linestyle="--", label="configured cut")
    ax.set_xlabel("linkage score threshold")
    ax.set_ylabel("pairwise")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower left")
    return _svg(fig)


def _sizes_plot(metrics: Mapping[str, Any]) -> str:
    fig, ax = _figure()
    width = 0.4
    for shift, name in ((-width / 2, "predicted"), (width / 2, "gold")):
        hist = metrics["sizes"][name]
        xs = [int(s) + shift for s in hist]
        ax.bar(xs, list(hist.values()), width=width, label=name)
    ax.set_xlabel("entity size (mentions)")
    ax.set_ylabel("entities")
    ax.legend()
    return _svg(fig)


def _trend_plot(history: Sequence[Mapping[str, Any]]) -> str:
    fig, ax = _figure()
    runs = [r["id"] for r in history]
    for label, key, index in HEADLINE[:7]:
        ys = [headline_value(r["metrics"], key, index) for r in history]
        ax.plot(runs, [float("nan") if y is None else y for y in ys], marker="o", label=label)
    ax.set_xticks(runs)
    ax.set_xlabel("evaluation run")
    ax.set_ylabel("score")
    ax.legend(fontsize=7, loc="lower left")
    return _svg(fig)


def _weights_plot(model: Mapping[str, Any]) -> str:
    """The pair model's weight (bits) of every comparison level, one group per field."""
    import numpy as np

    from er.match import PairModel

    fig, ax = _figure()
    fields = PairModel.from_json(model).fields
    for i, f in enumerate(fields):
        w = f.level_weights()[1:]
        xs = i + np.linspace(-0.3, 0.3, w.size)
        ax.bar(xs, w, width=0.6 / max(w.size, 1), color=_level_colours(w.size))
    ax.axhline(0, color="k", linewidth=0.6)
    _level_legend(ax)
    ax.set_xticks(range(len(fields)))
    ax.set_xticklabels([f.name for f in fields], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("weight, bits (far ... exact)")
    ax.set_title(
        f"pair model v{model['version']} ({model['method']}), prior {model['prior']:.3f}",
        fontsize=8,
    )
    return _svg(fig)


def _level_legend(ax: Any) -> None:
    """The colours of the comparison levels: far on the left, exact on the right."""
    from matplotlib.patches import Patch

    colours = _level_colours(3)
    names = ("far (least alike)", "levels between", "exact (most alike)")
    handles = [Patch(color=c, label=n) for c, n in zip(colours, names, strict=True)]
    ax.legend(handles=handles, fontsize=7, loc="best", title="comparison level", title_fontsize=7)


def _level_colours(n: int) -> list[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["RdYlGn"]
    return [cmap(0.1 + 0.8 * k / max(n - 1, 1)) for k in range(n)]


def _fmt(value: float, key: str) -> str:
    return f"{value:.0f}" if key == "n_entities" else f"{value:.4f}"


def _headline_rows(
    metrics: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> list[dict[str, str]]:
    """The headline table's rows: label, this run, the previous run, the change, meaning."""
    rows = []
    for label, key, index in HEADLINE:
        now = headline_value(metrics, key, index)
        if now is None:
            continue
        before = headline_value(previous, key, index) if previous else None
        change, cls = "", ""
        if before is not None:
            delta = now - before
            change = f"{delta:+.0f}" if key == "n_entities" else f"{delta:+.4f}"
            cls = "up" if delta > 0 else "down" if delta < 0 else ""
        rows.append(
            {
                "label": label,
                "now": _fmt(now, key),
                "before": "" if before is None else _fmt(before, key),
                "change": change,
                "cls": cls,
                "meaning": MEANING[label],
            }
        )
    return rows


def _agreement(a: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The gold-free signal (er.pipeline.agreement) with its shares in words."""
    if not a:
        return None

    def share(value: float | None) -> str:
        return "none" if value is None else f"{value:.1%}"

    return {
        **a,
        "cut": f"{a['cut']:g}",
        "inside_share": share(a["inside_improbable"]),
        "across_share": share(a["across_probable"]),
    }


def _paged(error: Mapping[str, Any]) -> dict[str, Any]:
    """An error view with its records in pages of PAGE (the first shown, the rest
    folded)."""
    records = list(error["records"])
    pages = [
        {"first": k + 1, "last": min(k + PAGE, len(records)), "records": records[k : k + PAGE]}
        for k in range(0, len(records), PAGE)
    ]
    return {**error, "pages": pages}


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("er.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template("report.html.j2")


def render_report(
    run: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    *,
    errors: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    model: Mapping[str, Any] | None = None,
) -> str:
    """The HTML page of one evaluation run.

    Parameters
    ----------
    run : mapping
        ``id``, ``collection``, ``created_at``, ``as_of_seq``, ``algorithm`` and
        ``metrics`` (:func:`er.evaluation.coreference_report`).
    history : sequence of mappings
        Earlier runs of the same collection and this one, oldest first (same keys).
    errors : mapping, optional
        ``false_merges`` and ``splits``: the worst errors as the user acts on them
        (:func:`er.pipeline.worst.error_views`: a ``title``, ``size``, ``parts``, every
        record with its gold and predicted entity, the deciding ``link`` with the pair
        model's reasons, the ``lineage`` Cypher). None: the page says none.
    model : mapping, optional
        The collection's pair model (``PairModel.to_json()``): its weights are plotted.
    """
    metrics = run["metrics"]
    earlier = [r for r in history if r["id"] != run["id"]]
    previous = earlier[-1]["metrics"] if earlier else None
    plots: tuple[tuple[str, str, str], ...] = (
        ("P/R/F1 against the score threshold", "sweep", _sweep_plot(metrics)),
        ("Entity sizes against gold", "sizes", _sizes_plot(metrics)),
        ("Headline metrics across runs", "trend", _trend_plot(history)),
    )
    if model is not None:
        plots += (("Pair-model weight per field and level", "weights", _weights_plot(model)),)
    errors = errors or {}
    kinds = [
        {
            "heading": heading,
            "id": anchor,
            "parts_of": parts_of,
            "about": about,
            "errors": [_paged(e) for e in errors.get(key, ())],
        }
        for key, heading, anchor, parts_of, about in _ERROR_KINDS
    ]
    return _template().render(
        title=f"er evaluation {run['id']}: {run['collection']}",
        run=run,
        metrics=metrics,
        headline=_headline_rows(metrics, previous),
        agreement=_agreement(metrics.get("model_agreement")),
        plots=[{"caption": c, "key": k, "svg": Markup(svg)} for c, k, svg in plots],
        error_kinds=kinds,
        has_model=model is not None,
        metrics_json=json.dumps(metrics, indent=1),
    )
