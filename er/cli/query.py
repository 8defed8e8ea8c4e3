"""``er query``: canned lineage queries, entities, history, explain and confidence."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from er.cli._common import _graph, _settings
from er.exceptions import ERError


def _node_arg(graph: Any, args: argparse.Namespace) -> int:
    """The node ``--id`` names, or the node of the record ingested as ``--mention``."""
    if args.mention is None:
        return int(args.id)
    node: int | None = graph.node_of(args.collection, args.mention)
    if node is None:
        raise ERError(f"collection {args.collection!r} has no mention {args.mention!r}.")
    return node


_LINEAGE_ARITY = {"entity": 1, "history": 1, "explain": 2}


def _lineage_mentions(args: argparse.Namespace) -> list[str]:
    """The external ids an entity/history/explain query names (positional or --mention)."""
    mentions = list(args.mentions) or ([args.mention] if args.mention is not None else [])
    want = _LINEAGE_ARITY[args.what]
    if len(mentions) != want:
        usage = "MENTION_A MENTION_B" if want == 2 else "MENTION"
        raise ERError(
            f"er query {args.what} takes {usage} (external ids). Got {len(mentions)} id(s)."
        )
    return mentions


def _print_lineage(what: str, result: dict[str, Any]) -> None:
    """Human-readable lines of an entity/history/explain answer."""
    out = sys.stdout.write
    if what == "entity":
        when = "now" if result["as_of"] is None else f"as of batch {result['as_of']}"
        out(f"mention {result['mention']!r} is in entity {result['entity']} {when} ")
        out(f"(minted at batch {result['minted']}), {len(result['members'])} member(s):\n")
        out("  " + ", ".join(result["members"]) + "\n")
        return
    if what == "history":
        for m in result["memberships"]:
            until = "now" if m["until"] is None else f"batch {m['until']}"
            out(f"entity {m['entity']}: batch {m['since']} .. {until}\n")
            for e in m["events"]:
                out(f"  batch {e['batch']}: {e['kind']} {e['from']} -> {e['to']}\n")
        return
    verdict = "together" if result["together"] else "apart"
    out(f"{result['a']!r} and {result['b']!r}: {verdict} at cut {result['cut']} ")
    out(f"(entities {result['entity_a']} and {result['entity_b']})\n")
    for key in ("path_a", "path_b"):
        steps = " -> ".join(f"{x['id']} ({_score(x['score'])})" for x in result[key])
        out(f"  {key}: {steps or '(no ancestors)'}\n")
    lca = result["lca"]
    out("  lowest common ancestor: " + ("none" if lca is None else str(lca["id"])) + "\n")
    d = result["deciding"]
    if d is not None:
        sign = ">=" if result["together"] else "<"
        out(f"  the cut turns on node {d['id']}: linkage {_score(d['score'])} {sign} ")
        out(f"{result['cut']}\n")
    model = result.get("model")
    if model is not None and result["path_a"] + result["path_b"]:
        # a merge's linkage is scored when the merge is made, at the collection's size
        # then; the prior falls as the collection grows (docs/pair-model.md)
        now = f"{model['population']:,}"
        out(f"  (linkages as scored when each merge was made; probabilities below at {now} ")
        out("mentions)\n")
    if model is None:
        for e in result["near"]:
            out(f"  k-NN edge: {e['a']} ~ {e['b']} cosine {e['sim']:.3f}\n")
        fields = ", ".join(f"{k} {_score(v)}" for k, v in result["fields"].items())
        out(f"  field cosines: {fields}\n")
    else:
        _print_model_view(result)
    conf = result["confidence"]
    if conf["p"] is None:
        out(f"  confidence: none ({conf['why']})\n")
    else:
        out(f"  confidence: P(one entity at the cut) = {conf['p']:.3f} (exact, trellis)\n")


def _print_model_view(result: dict[str, Any]) -> None:
    """Every probability of a pair-model explain, each under one label (the model's
    version and the collection size it scored at): the pair, the k-NN links between
    their sides, and the strongest of those links, which joined the sides."""
    model, near = result["model"], result["near"]
    scored = f"pair model v{model['version']} at {model['population']:,} mentions"
    out = sys.stdout.write
    out(f"  match probability of the pair: {model['probability']:.4f} ({scored})\n")
    for e in near:
        out(f"  k-NN link: {e['a']} ~ {e['b']} match probability {e['probability']:.4f}\n")
    _print_model(model, f"{result['a']} and {result['b']}")
    link = model.get("link")
    if link is None:
        return
    if {link["a"], link["b"]} == {result["a"], result["b"]}:
        out("  the link that joined their sides is this pair itself\n")
    else:
        _print_model(link, f"the link that joined their sides, {link['a']} ~ {link['b']}")


_SHOWN = 0.005  # bits a row of sums must move to be shown (a float's remainder is not)


def _print_model(model: dict[str, Any], what: str) -> None:
    """The pair model's reasons for one pair: a row per field, the sum, the probability."""
    from rich.console import Console
    from rich.table import Table

    scored = f"v{model['version']} at {model['population']:,} mentions"
    table = Table(title=f"{what}: pair model {scored}", title_justify="left")
    for name in ("field", "a", "b", "level", "weight (bits)"):
        table.add_column(name, justify="right" if name.startswith("weight") else "left")
    for f in model["fields"]:
        table.add_row(f["field"], _cell(f["a"]), _cell(f["b"]), f["level"], f"{f['weight']:+.2f}")
    if abs(model.get("dependence_weight", 0.0)) >= _SHOWN:
        # the pattern of agreements non-matches show together (households)
        table.add_row(
            "(fields agreeing together)", "", "", "", f"{model['dependence_weight']:+.2f}"
        )
    if abs(model.get("dates_apart", 0.0)) >= _SHOWN:
        # er.match._views.dates_apart: the dates are not one date, the string counts once
        label = "(dates apart: the text counted once)"
        table.add_row(label, "", "", "", f"{model['dates_apart']:+.2f}")
    table.add_row("prior", "", "", "", f"{model['prior_weight']:+.2f}")
    table.add_row("total", "", "", "", f"{model['match_weight']:+.2f}", style="bold")
    Console(width=120).print(table)
    temperature = model.get("temperature", 1.0)
    # a views model's total is taken over its temperature (er.match._views)
    over = f" (the total over its temperature, {temperature:g})" if temperature != 1.0 else ""
    sys.stdout.write(f"  match probability {model['probability']:.4f}{over}\n")


def _cell(value: str | None, width: int = 30) -> str:
    if value is None:
        return "(none)"
    return value if len(value) <= width else value[: width - 1] + "…"


def _score(value: Any) -> str:
    return "-" if value is None else f"{float(value):.3f}"


def cmd_query(args: argparse.Namespace) -> int:
    settings = _settings()
    stable_entity = args.what == "entity" and args.score is None and args.level is None
    if args.what in ("history", "explain") or stable_entity:
        from er.pipeline import run_lineage

        mentions = _lineage_mentions(args)
        result: Any = run_lineage(settings, args.what, args.collection, mentions, as_of=args.as_of)
        if args.json:
            sys.stdout.write(json.dumps(result) + "\n")
        else:
            _print_lineage(args.what, result)
        return 0
    if args.what == "confidence" and args.mentions and args.mention is None:
        args.mention = args.mentions[0] if len(args.mentions) == 1 else None
    elif args.mentions:
        raise ERError(f"er query {args.what} takes --mention or --id, not positional ids.")
    if args.what == "confidence":
        from er.pipeline import run_confidence

        if (args.mention is None) == (args.entity is None):
            raise ERError("er query confidence takes --mention EXTERNAL_ID or --entity ID.")
        result = run_confidence(settings, args.collection, args.mention, args.entity)
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    with _graph(settings) as graph:
        if args.what != "stats":
            args.id = _node_arg(graph, args)
        if args.what == "ancestors":
            result = graph.ancestors(args.collection, args.id, as_of=args.as_of)
        elif args.what == "members":
            result = graph.members(args.collection, args.id, as_of=args.as_of)
        elif args.what == "entity":
            result = graph.entity_of(
                args.collection, args.id, score=args.score, level=args.level, as_of=args.as_of
            )
        else:
            result = graph.stats(args.collection)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0
