"""``er train`` and ``er model``: retrain a collection's pair model; show it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from er.cli._common import _database, _settings
from er.exceptions import ERError


def cmd_train(args: argparse.Namespace) -> int:
    """Train a new model version on the collection's mentions (EM, or --gold)."""
    from er.pipeline import run_train
    from er.stores.sql import upgrade

    settings = _settings()
    engine = _database(settings)
    upgrade(engine)
    engine.dispose()
    out = run_train(settings, args.collection, from_gold=args.gold)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    """The collection's field types and pair model: each field's levels and weights."""
    from sqlalchemy.orm import Session

    from er.match import LADDERS, PairModel
    from er.stores.sql import find_collection

    settings = _settings()
    engine = _database(settings)
    with Session(engine) as session:
        coll = find_collection(session, args.collection)
        if coll is None:
            raise ERError(f"no collection {args.collection!r}.")
        config: dict[str, Any] = dict(coll.config)
    engine.dispose()
    if config.get("scoring") != "pair_model":
        raise ERError(f"collection {args.collection!r} is scored by cosine; it has no pair model.")
    doc = config.get("pair_model")
    if args.json:
        sys.stdout.write(json.dumps({"field_types": config["field_types"], "model": doc}) + "\n")
        return 0
    out = sys.stdout.write
    out(f"field types: {json.dumps(config['field_types'])}\n")
    if doc is None:
        out("no model yet: the writer trains one on the collection's first batch\n")
        return 0
    model = PairModel.from_json(doc)
    out(
        f"model v{model.version} ({model.method}, {model.n_train:,} mentions), "
        f"prior {model.prior:.3g}; weights in bits per level:\n"
    )
    for fw in model.fields:
        names = LADDERS[fw.kind].names
        levels = ", ".join(
            f"{names[i]} {w:+.1f}" for i, w in enumerate(fw.level_weights()) if i > 0
        )
        tf = f"; {len(fw.tf):,} frequent values adjusted" if fw.tf else ""
        side = ", one-sided" if fw.one_sided else ""
        out(f"  {fw.name} ({fw.kind}{side}): {levels}{tf}\n")
    if model.dependence:
        worst = min(model.dependence.values())
        out(
            f"  fields agreeing together: {len(model.dependence)} agreement patterns "
            f"corrected (down to {worst:+.1f} bits), e.g. a household's\n"
        )
    if shared := model.counted_once():
        fields = ", ".join(model.fields[f].name for f in shared)
        out(f"  counted once where they agree, as a household shares them: {fields}\n")
    if model.temperature != 1.0:
        out(
            f"  the total is taken over a temperature of {model.temperature:g} "
            "(free text's views)\n"
        )
    return 0
