"""A plain-Python model of the graph store's history semantics, used as the oracle.

It replays deltas the way DESIGN §3 defines them (edges retire first, then nodes
are upserted and retired, then edges are added; an edge belongs to batch b when
since <= b < until) and answers the same as-of questions as the stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from er.delta import ClusteringDelta


@dataclass
class HistoryOracle:
    created: dict[int, int] = field(default_factory=dict)
    retired: dict[int, int] = field(default_factory=dict)
    edges: list[list[int]] = field(default_factory=list)  # [child, parent, since, until|-1]

    def apply(self, delta: ClusteringDelta, seq: int) -> None:
        for child, parent in delta.edges_retired.tolist():
            for e in self.edges:
                if e[0] == child and e[1] == parent and e[3] == -1 and e[2] < seq:
                    e[3] = seq
        for node in delta.node_id.tolist():
            self.created.setdefault(node, seq)
        for node in delta.retired.tolist():
            self.retired.setdefault(node, seq)
        for child, parent in delta.edges_added.tolist():
            if not any(e[:3] == [child, parent, seq] for e in self.edges):
                self.edges.append([child, parent, seq, -1])

    def nodes_at(self, b: int) -> list[int]:
        return sorted(
            n for n, c in self.created.items() if c <= b and self.retired.get(n, 1 << 62) > b
        )

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
