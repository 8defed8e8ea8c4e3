"""Stable entity ids across batches: match old entities to new ones by overlap.

Cluster ids move as components merge and split; users need entity ids that do not
(DESIGN §3, "Stable entity ids"). After each batch the pipeline cuts the hierarchy
into a partition of the mentions (its entities) and hands it to
:meth:`EntityLedger.step`, a pure function of the ledger's state (no database):

- an entity whose members did not change keeps its id (new mentions may join it);
- a merge keeps the id of the predecessor contributing the most mentions (ties: the
  predecessor with more members, then the oldest id);
- a split keeps the id for the part holding the most of the old members and mints
  new ids for the others;
- ids are never reused: a retired id never comes back.

Ids are assigned greedily over (old entity, new entity) pairs in order of overlap,
so one rule covers merges, splits and their mixtures, and every old id goes to at
most one new entity. Each step reports the membership intervals to open and close
(``(:Mention)-[:IN_ENTITY {since, until}]->(:Entity)``) and the events
``(:Entity)-[:BECAME {batch, kind}]->(:Entity)`` that explain each change: one event
from every old entity to every other new entity that received some of its members;
``kind`` is ``split`` when the old entity's members went to several new entities,
else ``merge``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from er.exceptions import ConfigError

__all__ = ["EntityLedger", "EntityStep"]

Mention = Hashable


@dataclass(frozen=True)
class EntityStep:
    """What one batch changed.

    Attributes
    ----------
    batch : int
    joined : list of (mention, entity)
        Memberships that start at ``batch`` (``IN_ENTITY {since: batch}``).
    left : list of (mention, entity)
        Memberships that end at ``batch`` (``until = batch``).
    events : list of (old entity, new entity, kind)
        ``BECAME`` events, kind ``merge`` or ``split``.
    minted : list of int
        Entity ids created at this batch.
    retired : list of int
        Entity ids that stopped being current at this batch.
    """

    batch: int
    joined: list[tuple[Mention, int]] = field(default_factory=list)
    left: list[tuple[Mention, int]] = field(default_factory=list)
    events: list[tuple[int, int, str]] = field(default_factory=list)
    minted: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)


class EntityLedger:
    """Current entities, their ids, and the next id to mint.

    Parameters
    ----------
    members : mapping of int to iterable of mentions, optional
        Current entities (e.g. reloaded from the store); empty for a new collection.
    next_id : int, default 1
        Smallest id never used; must exceed every id in ``members``.
    last_batch : int, default 0
        The last batch stepped; batches must increase.
    """

    def __init__(
        self,
        members: Mapping[int, Iterable[Mention]] | None = None,
        next_id: int = 1,
        last_batch: int = 0,
    ) -> None:
        self.members: dict[int, set[Mention]] = {int(e): set(m) for e, m in (members or {}).items()}
        self.entity_of: dict[Mention, int] = {}
        for e, ms in self.members.items():
            for m in ms:
                if m in self.entity_of:
                    raise ConfigError(f"mention {m!r} is in entities {self.entity_of[m]} and {e}.")
                self.entity_of[m] = e
        if self.members and next_id <= max(self.members):
            raise ConfigError(f"next_id must exceed every entity id. Got {next_id}.")
        self.next_id = int(next_id)
        self.last_batch = int(last_batch)

    def step(self, batch: int, partition: Iterable[Iterable[Mention]]) -> EntityStep:
        """Match the new partition of the mentions to the current entities.

        Parameters
        ----------
        batch : int
            Sequence number of the batch, greater than every earlier one.
        partition : iterable of iterables of mentions
            The new entities: disjoint, covering every current mention (new ones too).

        Returns
        -------
        EntityStep
        """
        if batch <= self.last_batch:
            raise ConfigError(f"batches must increase: {batch} after {self.last_batch}.")
        clusters = [set(c) for c in partition if c]
        self._check_partition(clusters)
        ids = self._assign(clusters)
        step = self._diff(batch, clusters, ids)
        self.members = {e: c for e, c in zip(ids, clusters, strict=True)}
        self.entity_of = {m: e for e, c in self.members.items() for m in c}
        self.last_batch = batch
        return step

    def _check_partition(self, clusters: list[set[Mention]]) -> None:
        seen: set[Mention] = set()
        for c in clusters:
            if seen & c:
                raise ConfigError(f"mention {next(iter(seen & c))!r} is in two new entities.")
            seen |= c
        lost = self.entity_of.keys() - seen
        if lost:
            raise ConfigError(f"the new partition drops mention {next(iter(lost))!r}.")

    def _assign(self, clusters: list[set[Mention]]) -> list[int]:
        """One id per new cluster: greedy over (old, new) pairs by overlap."""
        overlap: dict[tuple[int, int], int] = defaultdict(int)
        for k, c in enumerate(clusters):
            for m in c:
                old = self.entity_of.get(m)
                if old is not None:
                    overlap[old, k] += 1
        # Most shared mentions first; then the larger old entity; then the oldest id;
        # then the new cluster holding the smallest mention order (stable by index).
        order = sorted(overlap, key=lambda p: (-overlap[p], -len(self.members[p[0]]), p[0], p[1]))
        ids: list[int | None] = [None] * len(clusters)
        taken: set[int] = set()
        for old, k in order:
            if ids[k] is None and old not in taken:
                ids[k] = old
                taken.add(old)
        for k in range(len(clusters)):
            if ids[k] is None:
                ids[k] = self.next_id
                self.next_id += 1
        return [int(i) for i in ids]  # type: ignore[arg-type]

    def _diff(self, batch: int, clusters: list[set[Mention]], ids: list[int]) -> EntityStep:
        step = EntityStep(batch)
        successors: dict[int, set[int]] = defaultdict(set)
        for e, c in zip(ids, clusters, strict=True):
            for m in c:
                old = self.entity_of.get(m)
                if old != e:
                    step.joined.append((m, e))
                    if old is not None:
                        step.left.append((m, old))
                if old is not None:
                    successors[old].add(e)
        for old, news in sorted(successors.items()):
            kind = "split" if len(news) > 1 else "merge"
            step.events.extend((old, new, kind) for new in sorted(news) if new != old)
        step.minted.extend(sorted(set(ids) - set(self.members)))
        step.retired.extend(sorted(set(self.members) - set(ids)))
        return step
