"""FieldTable's codes against a plain oracle: a field's code is the rank of the value's
first arrival; a pickled table (a checkpoint) goes on coding as the original does."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from er.match import FieldTable

values = st.one_of(st.none(), st.sampled_from(["", "a", "b", "é", "a b", "0", "None"]))
rows = st.lists(st.tuples(values, values), max_size=40)


@given(first=rows, then=rows)
@settings(max_examples=200, deadline=None)
def test_codes_are_first_arrival_ranks_across_a_pickle(
    first: list[tuple[str | None, str | None]], then: list[tuple[str | None, str | None]]
) -> None:
    table = FieldTable(["x", "y"])
    table.add(first)
    copy = pickle.loads(pickle.dumps(table))
    for t in (table, copy):
        t.add(then)
    everything = first + then
    for f in range(2):
        order = list(dict.fromkeys(r[f] for r in everything if r[f] is not None))
        want = [-1 if r[f] is None else order.index(r[f]) for r in everything]
        assert table.codes[:, f].tolist() == copy.codes[:, f].tolist() == want
        assert table.vocab[f] == copy.vocab[f] == order
    assert [copy.values(i) for i in range(len(copy))] == [{"x": x, "y": y} for x, y in everything]
