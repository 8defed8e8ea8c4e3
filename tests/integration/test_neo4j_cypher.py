"""Every Cypher statement er can send to Neo4j, checked offline by Neo4j's own parser.

No Neo4j server can run here, so the Neo4j adapter's statements would otherwise meet
Neo4j's parser for the first time in a user's deployment. Neo4j publishes its parser
and semantic analysis as the npm package ``@neo4j-cypher/language-support``;
``tools/cypherlint/lint.mjs`` runs it (``npm ci --prefix tools/cypherlint``, done by
``scripts/test.sh``) with each statement's own parameters declared, for Cypher 5.

What reaches the server is recorded at the adapter's one seam that cannot be real
here (the Bolt connection): ``Neo4jStore._statements`` renders writes exactly as
``_write`` sends them, batch splitting included; reads and DDL are recorded as passed
to the driver. The enumeration drives every public method of the store, and fails
when a method or a ``*_cypher`` builder is added without being driven.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import neo4j
import numpy as np
import pytest

from er.delta import ClusteringDelta
from er.entities import EntityLedger
from er.stores.graph import _cypher as cy
from er.stores.graph._base import GraphStore
from er.stores.graph._neo4j import Neo4jStore

ROOT = Path(__file__).resolve().parents[2]
LINTER = ROOT / "tools" / "cypherlint"
ERROR = 1  # LSP severity numbering: 1 error, 2 warning

# A statement that FalkorDB 4.16 runs without error (answering null) and Neo4j 5 rejects.
FALKORDB_ONLY = "MATCH (n:Node) RETURN n.x + count(*) AS c"


class _Row(dict[str, Any]):
    """A result row that answers 0 for any column: reads here only need a shape."""

    def __missing__(self, key: str) -> int:
        return 0


class _Recorder(Neo4jStore):
    """The Neo4j adapter with its Bolt connection replaced by a list of what it sends."""

    def __init__(self, write_batch_size: int) -> None:
        # A driver connects lazily: nothing is opened for this address.
        super().__init__(
            neo4j.GraphDatabase.driver("bolt://127.0.0.1:9"), write_batch_size=write_batch_size
        )
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        self.operation = ""

    def _write(self, parts: Sequence[cy.WritePart], params: dict[str, Any]) -> None:
        for cypher, statement_params in self._statements(parts, params):
            self.sent.append((self.operation, cypher, statement_params))

    def _read(self, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        self.sent.append((self.operation, cypher, dict(params)))
        if "keys" in params:  # existence checks: every referenced node exists
            return [_Row(id=int(str(k).rsplit("#", 1)[1])) for k in params["keys"]]
        return [_Row()]

    def _run_schema(self, statements: Sequence[str]) -> None:
        self.sent += [(self.operation, s, {}) for s in statements]


def _delta(
    nodes: dict[int, int],
    edges: Sequence[tuple[int, int]] = (),
    retired: Sequence[int] = (),
    edges_retired: Sequence[tuple[int, int]] = (),
) -> ClusteringDelta:
    """A delta from ``{node id: size}`` (size 1 = a mention) and edge lists."""
    ids = np.array(sorted(nodes), dtype=np.int64)
    sizes = np.array([nodes[i] for i in ids], dtype=np.int64)
    leaf = sizes == 1
    return ClusteringDelta(
        node_id=ids,
        is_leaf=leaf,
        size=sizes,
        score=np.where(leaf, np.nan, 0.5),
        level_lo=np.where(leaf, 0, 1).astype(np.int32),
        level_hi=np.where(leaf, 0, 2).astype(np.int32),
        retired=np.array(retired, dtype=np.int64),
        edges_added=np.array(edges, dtype=np.int64).reshape(-1, 2),
        edges_retired=np.array(edges_retired, dtype=np.int64).reshape(-1, 2),
        algorithm="mbscc",
    )


def _apply_deltas(store: GraphStore) -> None:
    """Representative deltas: nodes and edges added and retired, DAG parents, big batches."""
    first = _delta(
        {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 3, 7: 3, 8: 6},
        edges=[(0, 6), (1, 6), (2, 6), (2, 7), (3, 7), (4, 7), (5, 8), (6, 8), (7, 8)],
    )
    ledger = EntityLedger()
    store.apply_delta(
        "people",
        first,
        1,
        external_ids={i: f"rec-{i}" for i in range(6)},
        entities=ledger.step(1, [[0, 1, 2], [3, 4], [5]]),
        near=[(0, 1, 0.9), (2, 0, 0.7), (3, 4, 0.8), (5, 2, 0.2)],
    )
    second = _delta(
        {9: 1, 10: 2, 8: 7},
        edges=[(9, 10), (5, 10), (10, 8)],
        retired=[7],
        edges_retired=[(2, 7), (3, 7), (4, 7), (7, 8), (5, 8)],
    )
    # a merge ({0,1,2} + {5}) and a split ({3,4}): every entity statement is sent
    store.apply_delta("people", second, 2, entities=ledger.step(2, [[0, 1, 2, 5, 9], [3], [4]]))
    store.apply_delta("people", ClusteringDelta.empty("mbscc"), 3)


# Every public method of the graph store and how the enumeration drives it. A method
# added to GraphStore without a line here fails test_every_store_method_is_driven.
RECIPES: dict[str, Callable[[GraphStore], object]] = {
    "init_schema": lambda s: s.init_schema(),
    "apply_delta": _apply_deltas,
    "ancestors": lambda s: s.ancestors("people", 2, as_of=1),
    "members": lambda s: s.members("people", 8),
    "node_of": lambda s: s.node_of("people", "rec-2"),
    "entity_of": lambda s: (
        s.entity_of("people", 2, score=0.4),
        s.entity_of("people", 2, level=1, as_of=1),
    ),
    "structure": lambda s: s.structure("people", as_of=1),
    "stats": lambda s: s.stats("people"),
    "applied_seq": lambda s: s.applied_seq("people"),
    "entity_of_mention": lambda s: s.entity_of_mention("people", "rec-2", as_of=1),
    "entity_memberships": lambda s: s.entity_memberships("people"),
    "memberships": lambda s: s.memberships("people", as_of=2),
    "mention_history": lambda s: s.mention_history("people", "rec-2"),
    "near_between": lambda s: s.near_between("people", [0, 1], [2], as_of=2, limit=3),
    "near_of": lambda s: s.near_of("people", [0, 1], as_of=2),
    "delete_collection": lambda s: s.delete_collection("people"),
    "close": lambda s: None,  # sends nothing
    "lost": lambda s: s.lost(),  # asks the process, sends nothing
}


def _store_methods() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(GraphStore, inspect.isfunction)
        if not name.startswith("_")
    }


def _builders() -> dict[str, Callable[..., str]]:
    return {
        name: fn
        for name, fn in vars(cy).items()
        if name.endswith("_cypher") and inspect.isfunction(fn)
    }


def _json_safe(value: Any) -> Any:
    """Parameters as JSON for the linter (NaN scores of mentions travel as null-like 0)."""
    if isinstance(value, float) and not math.isfinite(value):
        return 0.0
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def enumerate_adapter_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[tuple[str, str, dict[str, Any]]], set[str]]:
    """Drive every store method on the recording adapter.

    Returns
    -------
    sent : list of (operation, cypher, parameters)
        Every statement in the order the adapter sent it.
    built : set of str
        Names of the ``_cypher`` builders that were called.
    """
    built: set[str] = set()

    def traced(name: str, fn: Callable[..., str]) -> Callable[..., str]:
        def wrapper(*args: Any, **kwargs: Any) -> str:
            built.add(name)
            return fn(*args, **kwargs)

        return wrapper

    for name, fn in _builders().items():
        monkeypatch.setattr(cy, name, traced(name, fn))
    store = _Recorder(write_batch_size=2)  # small, so that every write is split
    for operation, drive in RECIPES.items():
        store.operation = operation
        drive(store)
    return store.sent, built


def _canned_files() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The queries users run themselves, with every parameter they name declared."""
    values = {"collection": "people", "id": 1, "as_of": cy.AS_OF_NOW, "threshold": 0.5}
    values["level"] = 3
    values |= {"external_id": "rec-1", "left": [1, 2], "right": [3], "limit": 5}
    for path in sorted((ROOT / "schema" / "queries").glob("*.cypher")):
        text = path.read_text()
        names = set(re.findall(r"\$([A-Za-z_]\w*)", text))
        yield f"schema/queries/{path.name}", text, {n: values.get(n, 1) for n in names}


def _ddl() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for i, statement in enumerate(cy.schema_statements("neo4j")):
        yield f"schema/neo4j statement {i + 1}", statement, {}


def lint(statements: Sequence[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Neo4j's diagnostics for each ``(name, cypher, parameters)``."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is required for the Neo4j Cypher check (Debian package nodejs)")
    if not (LINTER / "node_modules" / "@neo4j-cypher").is_dir():
        pytest.fail(f"run `npm ci --prefix {LINTER}` first (scripts/test.sh does)")
    payload = [
        {"name": name, "cypher": cypher, "parameters": _json_safe(params)}
        for name, cypher, params in statements
    ]
    done = subprocess.run(
        [node, str(LINTER / "lint.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(done.stdout)["results"]


def _errors(results: list[dict[str, Any]]) -> list[str]:
    return [
        f"{r['name']}: {d['message']} (line {d['line']}, col {d['character']})"
        for r in results
        for d in r["diagnostics"]
        if d["severity"] == ERROR
    ]


def _unique(
    sent: Sequence[tuple[str, str, dict[str, Any]]],
) -> list[tuple[str, str, dict[str, Any]]]:
    """One statement per (text, parameter names): batches of one write differ in rows only."""
    seen: dict[tuple[str, tuple[str, ...]], tuple[str, str, dict[str, Any]]] = {}
    for operation, cypher, params in sent:
        key = (cypher, tuple(sorted(params)))
        seen.setdefault(key, (f"{operation}: {cypher[:60]}", cypher, params))
    return list(seen.values())


def test_every_store_method_is_driven() -> None:
    assert set(RECIPES) == _store_methods()


def test_every_statement_passes_neo4j_semantic_analysis(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent, built = enumerate_adapter_statements(monkeypatch)
    assert built == set(_builders()), "a *_cypher builder is never reached by the enumeration"
    writes = [s for s in sent if s[0] == "apply_delta" and "UNWIND" in s[1]]
    assert len(writes) > len({w[1] for w in writes}), "no write was split into batches"
    statements = [*_unique(sent), *_canned_files(), *_ddl()]
    results = lint(statements)
    warnings = sum(d["severity"] != ERROR for r in results for d in r["diagnostics"])
    with capsys.disabled():
        sys.stdout.write(
            f"\nneo4j cypher check: {len(statements)} distinct statements "
            f"({len(sent)} sent by the adapter) passed Neo4j's semantic analysis; "
            f"{warnings} warnings\n"
        )
    assert _errors(results) == []


def test_an_undeclared_parameter_is_an_error() -> None:
    [result] = lint([("missing", "MATCH (n:Node {key: $key}) RETURN n.id", {})])
    assert _errors([result]) == ["missing: Parameter $key is not defined. (line 1, col 21)"]


def test_broken_statement_is_reported_with_neo4js_message() -> None:
    broken = "MATCH (n:Node) RETURN n ORDER BY n.id WHERE n.id > 1"
    [result] = lint([("broken", broken, {})])
    [error] = _errors([result])
    assert error.startswith("broken: Invalid input 'WHERE'")


def test_statement_falkordb_runs_but_neo4j_rejects() -> None:
    # FalkorDB 4.16 runs this (test_falkordb_does_run_that_statement); Neo4j 5 refuses it.
    [result] = lint([("falkordb-only", FALKORDB_ONLY, {})])
    [error] = _errors([result])
    assert "Aggregation column contains implicit grouping expressions" in error


@pytest.mark.graph
def test_falkordb_does_run_that_statement(falkordb_server: Any) -> None:

    graph = falkordb_server.client().select_graph("cypher_lint")
    graph.query("CREATE (:Node {x: 1}), (:Node {x: 1}), (:Node {x: 2})")
    rows = sorted(graph.query(FALKORDB_ONLY).result_set)
    graph.delete()
    # No error, and a meaningless answer: FalkorDB evaluates n.x outside any group.
    assert rows == [[None]]
