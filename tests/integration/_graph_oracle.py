"""A plain-Python model of the graph store's history semantics, used as the oracle.

It replays deltas the way DESIGN §3 defines them (edges retire first, then nodes
are upserted and retired, then edges are added; an edge belongs to batch b when
since <= b < until). A node lives in intervals: an id that was retired and comes
back opens a new one. Attributes keep the values of the newest batch that wrote
them, whatever order batches arrive in, and their history: every batch that wrote a
node newer than all before it starts a version (a replay of that batch rewrites it,
an older batch is ignored), and the values as of batch b are those of the newest
version started at or before b.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from er.delta import ClusteringDelta

OPEN = 1 << 63


@dataclass
class HistoryOracle:
    lives: dict[int, list[list[int]]] = field(default_factory=dict)  # node -> [[since, until]]
    attrs: dict[int, dict[str, Any]] = field(default_factory=dict)
    stamp: dict[int, int] = field(default_factory=dict)
    versions: dict[int, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    edges: list[list[int]] = field(default_factory=list)  # [child, parent, since, until|-1]

    def apply(self, delta: ClusteringDelta, seq: int) -> None:
        for child, parent in delta.edges_retired.tolist():
            for e in self.edges:
                if e[0] == child and e[1] == parent and e[3] == -1 and e[2] < seq:
                    e[3] = seq
        for k, node in enumerate(delta.node_id.tolist()):
            lives = self.lives.setdefault(node, [])
            if not lives or lives[-1][1] <= seq:
                lives.append([seq, OPEN])
            stamp = self.stamp.get(node, -1)
            if stamp <= seq:
                self.stamp[node] = seq
                score = float(delta.score[k])
                self.attrs[node] = {
                    "size": int(delta.size[k]),
                    "score": None if score != score else score,
                    "level_lo": int(delta.level_lo[k]),
                    "level_hi": int(delta.level_hi[k]),
                }
                history = self.versions.setdefault(node, [])
                if stamp == seq:
                    history.pop()
                history.append((seq, self.attrs[node]))
        for node in delta.retired.tolist():
            lives = self.lives[node]
            if lives[-1][1] == OPEN and lives[-1][0] < seq:
                lives[-1][1] = seq
        for child, parent in delta.edges_added.tolist():
            if not any(e[:3] == [child, parent, seq] for e in self.edges):
                self.edges.append([child, parent, seq, -1])

    def nodes_at(self, b: int) -> list[int]:
        return sorted(n for n, lives in self.lives.items() if any(s <= b < u for s, u in lives))

    def attrs_at(self, node: int, b: int) -> dict[str, Any] | None:
        """The node's attributes as of batch ``b``; None if no batch <= b wrote it."""
        then = [values for since, values in self.versions.get(node, []) if since <= b]
        return then[-1] if then else None

    def edges_at(self, b: int) -> np.ndarray:
        rows = sorted((c, p) for c, p, s, u in self.edges if s <= b and (u == -1 or u > b))
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def ancestors_at(self, node: int, b: int) -> set[int]:
        current = self.edges_at(b)
        seen: set[int] = set()
        frontier = [node]
        while frontier:
            n = frontier.pop()
            for parent in current[current[:, 0] == n, 1].tolist():
                if parent not in seen:
                    seen.add(parent)
                    frontier.append(parent)
        return seen

    def paths_up(self, node: int, b: int) -> list[list[int]]:
        """Every upward path from ``node`` as of batch ``b``: its nodes after ``node``."""
        current = self.edges_at(b)
        paths, stack = [], [[node]]
        while stack:
            path = stack.pop()
            for parent in current[current[:, 0] == path[-1], 1].tolist():
                paths.append([*path[1:], parent])
                stack.append([*path, parent])
        return paths

    def entity_at_score(self, node: int, b: int, threshold: float) -> int:
        """Highest ancestor reached through clusters all scored >= threshold as of b
        (deepest path first, then the smaller id); the node itself if none."""
        score = {n: (self.attrs_at(n, b) or {}).get("score") for n in self.nodes_at(b)}
        ok = [
            (-len(p), p[-1])
            for p in self.paths_up(node, b)
            if all(score.get(n) is not None and score[n] >= threshold for n in p)
        ]
        return min(ok)[1] if ok else node

    def entity_at_level(self, node: int, b: int, level: int) -> int:
        """Nearest ancestor whose levels as of b span ``level`` (then the smaller id)."""
        ok = []
        for p in self.paths_up(node, b):
            attrs = self.attrs_at(p[-1], b)
            if attrs is not None and attrs["level_lo"] <= level <= attrs["level_hi"]:
                ok.append((len(p), p[-1]))
        return min(ok)[1] if ok else node
