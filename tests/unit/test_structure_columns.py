"""The graph store's column reads: windows, memberships by node, structure rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from er.stores.graph import _cypher as cy
from er.stores.graph._structure import Memberships, Structure, id_pairs, node_columns


@given(
    st.dictionaries(st.integers(0, 300), st.integers(1, 50), max_size=60),
    st.lists(st.integers(-5, 310), max_size=40),
)
def test_memberships_of_agrees_with_a_dict(stored: dict[int, int], asked: list[int]) -> None:
    mentions = np.array(sorted(stored), np.int64)
    entities = np.array([stored[m] for m in mentions.tolist()], np.int64)
    got = Memberships(mentions, entities).of(np.array(asked, np.int64))
    assert got.tolist() == [stored.get(v, -1) for v in asked]
    assert Memberships(mentions, entities).as_dict() == stored


@given(
    st.lists(
        st.tuples(
            st.booleans(), st.integers(1, 9), st.none() | st.floats(-1, 1), st.integers(0, 4)
        ),
        max_size=30,
    ),
    st.integers(1, 7),
)
def test_windows_joined_read_as_one(rows: list[tuple], width: int) -> None:
    """Node rows cut into windows of ``width`` ids give the same structure as one read."""
    maps = [
        {"id": i, "leaf": f, "size": z, "score": s, "level_lo": lo, "level_hi": lo + 1}
        for i, (f, z, s, lo) in enumerate(rows)
    ]
    edges = [{"child": i, "parent": i + 1} for i in range(len(rows) - 1)]
    one = Structure.from_windows([node_columns(maps)], [id_pairs(edges, "child", "parent")])
    cut = range(0, len(rows), width)
    many = Structure.from_windows(
        [node_columns(maps[lo : lo + width]) for lo in cut],
        [id_pairs(edges[lo : lo + width], "child", "parent") for lo in cut],
    )
    assert many.nodes == one.nodes == maps
    assert many.edges.tolist() == one.edges.tolist() == [[e["child"], e["parent"]] for e in edges]


@pytest.mark.parametrize(
    ("name", "var"),
    [("structure_nodes", "n"), ("structure_edges", "c"), ("entity_memberships", "m")],
)
def test_windowed_queries_keep_the_canned_text(name: str, var: str) -> None:
    text = cy.windowed(name, var)
    window = f"{var}.id + 0 >= $lo AND {var}.id + 0 < $hi AND "
    assert text.replace(window, "") == cy.canned_query(name)
