"""``er cut``: change a collection's entity cut, recorded, without re-ingesting."""

from __future__ import annotations

import argparse
import json
import sys

from er.cli._common import _database, _progress, _settings


def cmd_cut(args: argparse.Namespace) -> int:
    """Record the new cut; apply it now in process, or queue it (ER_BROKER_URL set)."""
    from er.pipeline import run_cluster, run_cut
    from er.stores.sql import upgrade

    settings = _settings()
    engine = _database(settings)
    upgrade(engine)
    engine.dispose()
    if args.gold:
        with _progress(f"cutting {args.collection}'s hierarchy where its gold labels score best"):
            out = run_cut(settings, args.collection, None)
    else:
        out = run_cut(settings, args.collection, args.threshold)
    if settings.broker_url:
        from workers.app import CLUSTER_QUEUE
        from workers.tasks import cluster

        cluster.apply_async(kwargs={"collection": args.collection}, queue=CLUSTER_QUEUE)
        out["applied"] = "queued"
    else:
        reports = run_cluster(settings, args.collection)
        out["applied"] = "done" if any(r["batch_seq"] == out["batch_seq"] for r in reports) else ""
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        if "gold" in out:
            g = out["gold"]
            sys.stderr.write(
                f"{args.collection}: {g['n_labelled']} labelled mentions score pairwise "
                f"P {g['precision']:.4f} / R {g['recall']:.4f} / F1 {g['f1']:.4f} at cut "
                f"{out['to']:.4f} (hierarchy of batch {g['as_of']})\n"
            )
        sys.stderr.write(
            f"{args.collection}: entity cut {out['from']} -> {out['to']}, applied by batch "
            f"{out['batch_seq']} ({out['applied'] or 'pending'}); "
            f"er query history shows each mention's merges and splits\n"
        )
    return 0
