"""Where algorithm cores meet the stores (DESIGN §5): nothing else imports both.

DESIGN §4: **ingest** validates records, upserts the accepted ones as mentions,
stores the rejected ones with a reason and opens a pending batch; **cluster** takes a
collection's pending batches in sequence order under the collection's writer lock,
normalises and featurizes them, steps the incremental core (MBSCC by default, GRINCH
or LLAMA per collection), applies the delta to the graph stamped with the batch seq,
checkpoints the state and marks the batch done with timings per stage; **evaluate**
scores entities against gold labels. Entry points (``run_*``) open the stores the
settings name; Celery tasks and the CLI call them.

Modules, each importing only what its step needs:

- :mod:`~er.pipeline.config`: a collection's config, its core and featurizer;
- :mod:`~er.pipeline.ingest`: validate a batch, store mentions and rejects;
- :mod:`~er.pipeline.state`: the writer's checkpointed state;
- :mod:`~er.pipeline.writer`: the cluster writer (one per collection), its loop in
  :mod:`~er.pipeline.lane`;
- :mod:`~er.pipeline.fit`: one batch fit at once and stored (``er demo --synthetic``);
- :mod:`~er.pipeline.partition`: the one definition of a collection's entities;
- :mod:`~er.pipeline.queries`: entity, history and explain of mentions;
- :mod:`~er.pipeline.confidence`: exact entity confidence (the trellis);
- :mod:`~er.pipeline.evaluate`: evaluation runs and their reports;
- :mod:`~er.pipeline.cut`: changing a collection's entity cut;
- :mod:`~er.pipeline.train`: training a collection's pair model;
- :mod:`~er.pipeline.status`: batches, lag and the writer's recent work;
- :mod:`~er.pipeline.heartbeat`: each worker process's heartbeat;
- :mod:`~er.pipeline.operations`: workers, stranded batches, failed tasks, retries,
  rejected records;
- :mod:`~er.pipeline.stores`: the process's store connections;
- :mod:`~er.pipeline.run`: the ``run_*`` entry points.
"""

from er.pipeline.confidence import CONFIDENCE_CONTEXT, CONFIDENCE_LIMIT, mention_confidence
from er.pipeline.config import (
    DEFAULT_ALGORITHM,
    DEFAULT_CUT,
    DEFAULT_ENTITY_CUT,
    DEFAULT_PAIR_CUT,
    PIPELINE_ALGORITHMS,
    PIPELINE_PARAMS,
    SCORINGS,
    new_collection_config,
)
from er.pipeline.evaluate import evaluate_collection
from er.pipeline.fit import fit_and_store
from er.pipeline.heartbeat import Heartbeat, start_heartbeat
from er.pipeline.ingest import ingest_records
from er.pipeline.partition import entities
from er.pipeline.queries import explain_pair, mention_entity, mention_history
from er.pipeline.run import (
    has_pending,
    run_cluster,
    run_confidence,
    run_cut,
    run_entities,
    run_evaluation,
    run_ingest,
    run_lineage,
    run_rejects,
    run_retry,
    run_status,
    run_task_failed,
    run_tasks_retried,
    run_train,
    run_workers,
)
from er.pipeline.schema import CONFIG_KEYS
from er.pipeline.state import NEAR_K
from er.pipeline.state import _State as _State  # checkpoints pickled before the split
from er.pipeline.status import collection_status, recent_work, writer_seconds, writer_stages
from er.pipeline.stores import close_stores
from er.pipeline.writer import cluster_pending

__all__ = [
    "CONFIDENCE_CONTEXT",
    "CONFIDENCE_LIMIT",
    "CONFIG_KEYS",
    "DEFAULT_ALGORITHM",
    "DEFAULT_CUT",
    "DEFAULT_ENTITY_CUT",
    "DEFAULT_PAIR_CUT",
    "NEAR_K",
    "PIPELINE_ALGORITHMS",
    "PIPELINE_PARAMS",
    "SCORINGS",
    "Heartbeat",
    "close_stores",
    "cluster_pending",
    "collection_status",
    "entities",
    "evaluate_collection",
    "explain_pair",
    "fit_and_store",
    "has_pending",
    "ingest_records",
    "mention_confidence",
    "mention_entity",
    "mention_history",
    "new_collection_config",
    "recent_work",
    "run_cluster",
    "run_confidence",
    "run_cut",
    "run_entities",
    "run_evaluation",
    "run_ingest",
    "run_lineage",
    "run_rejects",
    "run_retry",
    "run_status",
    "run_task_failed",
    "run_tasks_retried",
    "run_train",
    "run_workers",
    "start_heartbeat",
    "writer_seconds",
    "writer_stages",
]
