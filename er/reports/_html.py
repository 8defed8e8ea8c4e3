"""One evaluation run as a self-contained HTML page: figures, plots, worst errors.

Plots are matplotlib figures embedded as inline SVG; the page loads nothing from the
network (no scripts, fonts or styles from elsewhere), so it opens offline and can be
attached to a ticket as one file.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

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
    ("Jacc/pt", "jacc_pt", None),
    ("entities", "n_entities", None),
)

_STYLE = """
body{font-family:sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}
th{background:#f3f3f3;text-align:left}.up{color:#16702e}.down{color:#a8201a}
figure{display:inline-block;margin:0 1em 1em 0;vertical-align:top}
pre{background:#f7f7f7;padding:.5em;white-space:pre-wrap;font-size:85%}
"""


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
    ax.set_xticks(range(len(fields)))
    ax.set_xticklabels([f.name for f in fields], rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("weight, bits (far ... exact)")
    ax.set_title(
        f"pair model v{model['version']} ({model['method']}), prior {model['prior']:.3f}",
        fontsize=8,
    )
    return _svg(fig)


def _level_colours(n: int) -> list[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["RdYlGn"]
    return [cmap(0.1 + 0.8 * k / max(n - 1, 1)) for k in range(n)]


def _fmt(value: float, key: str) -> str:
    return f"{value:.0f}" if key == "n_entities" else f"{value:.4f}"


def _headline_rows(metrics: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
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
        prev = "" if before is None else _fmt(before, key)
        rows.append(
            f"<tr><td>{label}</td><td>{_fmt(now, key)}</td><td>{prev}</td>"
            f'<td class="{cls}">{change}</td></tr>'
        )
    return "".join(rows)


def _error_rows(
    errors: Sequence[Mapping[str, Any]],
    excerpts: Mapping[int, tuple[str, str]],
    lineage: Mapping[int, str],
    details: Mapping[int, Mapping[str, Any]],
) -> str:
    rows = []
    for err in errors:
        first = err["mentions"][0]
        ids = ", ".join(html.escape(excerpts.get(m, (str(m), ""))[0]) for m in err["mentions"])
        if first in details:  # the records field by field, with the model's reasons
            records = _records_table(details[first])
        else:
            records = "<br>".join(
                html.escape(excerpts.get(m, ("", ""))[1]) for m in err["mentions"][:4]
            )
        cypher = html.escape(lineage.get(first, ""))
        rows.append(
            f"<tr><td>{html.escape(str(err['group']))}</td><td>{len(err['mentions'])}</td>"
            f"<td>{err['parts']}</td><td>{ids}</td><td>{records}</td>"
            f"<td><details><summary>Cypher</summary><pre>{cypher}</pre></details></td></tr>"
        )
    return "".join(rows)


def _records_table(detail: Mapping[str, Any]) -> str:
    """Up to four records side by side, one row per field, and the pair model's level
    and weight for the first two: why the model put them together or apart."""
    records = detail["records"]
    reasons: dict[str, list[Mapping[str, Any]]] = {}
    for why in detail["reasons"]:  # a field compared in views has one reason per view
        reasons.setdefault(why.get("column", why["field"]), []).append(why)
    head = "".join(f"<th>{html.escape(r['id'])}</th>" for r in records)
    rows = []
    for name in detail["fields"]:
        views: list[Mapping[str, Any] | None] = [*reasons.get(name, [])] or [None]
        for k, why in enumerate(views):
            cells = "".join(
                f"<td>{html.escape(str(r['values'].get(name) or '') if k == 0 else '')}</td>"
                for r in records
            )
            label = why["field"] if why else name
            level = html.escape(why["level"]) if why else ""
            weight = f"{why['weight']:+.1f}" if why else ""
            rows.append(
                f"<tr><th>{html.escape(label)}</th>{cells}<td>{level}</td><td>{weight}</td></tr>"
            )
    total = f"match probability of the first two records: {detail['probability']:.3f}"
    return (
        f'<table class="records"><tr><th>field</th>{head}<th>level (1st vs 2nd)</th>'
        f"<th>weight</th></tr>{''.join(rows)}</table><small>{total}</small>"
    )


def _agreement_section(a: Mapping[str, Any] | None) -> str:
    """The gold-free signal: the entities against the pair model (er.pipeline.agreement)."""
    if not a:
        return ""

    def share(value: float | None) -> str:
        return "none" if value is None else f"{value:.1%}"

    cut = a["cut"]
    sample = "a sample of " if a["sampled"] else "all "
    return f"""<h2>Entities against the pair model (no gold needed)</h2>
<table id="model-agreement"><tr><th>pairs</th><th>how many</th><th>share</th></tr>
<tr><td>inside one entity, scored under {cut:g} (improbable)</td>
<td>{a["inside_pairs"]:,} ({sample}pairs inside entities)</td>
<td>{share(a["inside_improbable"])}</td></tr>
<tr><td>candidates across two entities, scored {cut:g} or more (probable)</td>
<td>{a["across_pairs"]:,}</td><td>{share(a["across_probable"])}</td></tr></table>
<p>Scored by the pair model version {a["model_version"]} at {a["population"]:,} mentions.
A high share inside means entities hold records the model calls different; across, that
the hierarchy keeps apart records the model calls one.</p>"""


def render_report(
    run: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    *,
    excerpts: Mapping[int, tuple[str, str]],
    lineage: Mapping[int, str],
    model: Mapping[str, Any] | None = None,
    details: Mapping[int, Mapping[str, Any]] | None = None,
) -> str:
    """The HTML page of one evaluation run.

    Parameters
    ----------
    run : mapping
        ``id``, ``collection``, ``created_at``, ``as_of_seq``, ``algorithm`` and
        ``metrics`` (:func:`er.evaluation.coreference_report`).
    history : sequence of mappings
        Earlier runs of the same collection and this one, oldest first (same keys).
    excerpts : mapping of int to (str, str)
        Mention index -> (external id, short excerpt of its record).
    lineage : mapping of int to str
        Mention index -> the Cypher (with its parameters) that shows its lineage.
    model : mapping, optional
        The collection's pair model (``PairModel.to_json()``): its weights are plotted.
    details : mapping of int to mapping, optional
        First mention of an error -> ``fields``, ``records`` (up to four: ``id`` and
        ``values``), ``reasons`` (the model's per-field level and weight for the first
        two) and their ``probability``: shown as a field-by-field table.
    """
    metrics = run["metrics"]
    earlier = [r for r in history if r["id"] != run["id"]]
    previous = earlier[-1]["metrics"] if earlier else None
    title = f"er evaluation {run['id']}: {run['collection']}"
    head = ["metric", "this run", "previous run", "change"]
    err_head = ["entity / gold", "mentions", "parts", "mention ids", "records", "lineage"]
    th = "".join(f"<th>{h}</th>" for h in head)
    err_th = "".join(f"<th>{h}</th>" for h in err_head)
    plots: tuple[tuple[str, str, str], ...] = (
        ("P/R/F1 against the score threshold", "sweep", _sweep_plot(metrics)),
        ("Entity sizes against gold", "sizes", _sizes_plot(metrics)),
        ("Headline metrics across runs", "trend", _trend_plot(history)),
    )
    if model is not None:
        plots += (("Pair-model weight per field and level", "weights", _weights_plot(model)),)
    details = details or {}
    figures = "".join(
        f'<figure id="plot-{key}"><figcaption>{caption}</figcaption>{svg}</figure>'
        for caption, key, svg in plots
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>Collection <b>{html.escape(str(run["collection"]))}</b>, as of batch {run["as_of_seq"]},
algorithm {html.escape(str(run["algorithm"]))}, entity cut at score {metrics["threshold"]:.4f};
{metrics["n_points"]} mentions, {metrics["n_entities"]} entities
({metrics["n_gold_entities"]} in gold). Run at {html.escape(str(run["created_at"]))}.</p>
<h2>Headline</h2><table id="headline"><tr>{th}</tr>{_headline_rows(metrics, previous)}</table>
{_agreement_section(metrics.get("model_agreement"))}
<h2>Plots</h2>{figures}
<h2>Largest false merges</h2>
<table id="false-merges"><tr>{err_th}</tr>
{_error_rows(metrics["false_merges"], excerpts, lineage, details)}</table>
<h2>Largest splits</h2>
<table id="splits"><tr>{err_th}</tr>
{_error_rows(metrics["splits"], excerpts, lineage, details)}</table>
<h2>All figures</h2><pre id="metrics-json">{html.escape(json.dumps(metrics, indent=1))}</pre>
</body></html>
"""
