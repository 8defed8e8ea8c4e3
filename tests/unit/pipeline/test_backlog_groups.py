"""The writer's backlog steps (issue #30): which pending batches go together.

Oracles: the rules stated by the issue (a cap on mentions per step, replays grouped as
recorded, a batch arriving alone resolved alone) checked as properties of the plan,
not by re-running the planner's own loop.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from er.pipeline.lane import GROUP_MAX_MENTIONS, _Queued, plan_groups


@st.composite
def queues(draw: st.DrawFn) -> list[_Queued]:
    """Batches in sequence order: first some stepped before (recorded groups, done or
    cut short by a crash), then new ones, sizes from empty to above the cap."""
    sizes = st.one_of(
        st.integers(0, 0),
        st.integers(1, GROUP_MAX_MENTIONS),
        st.integers(GROUP_MAX_MENTIONS - 50, GROUP_MAX_MENTIONS + 50),
        st.integers(1, 300),
    )
    out: list[_Queued] = []
    seq = draw(st.integers(1, 5))
    for _ in range(draw(st.integers(0, 4))):  # recorded groups
        width = draw(st.integers(1, 4))
        status = draw(st.sampled_from(["done", "running"]))
        end = seq + width - 1
        for s in range(seq, end + 1):
            out.append(_Queued(s, s, status, draw(sizes), end))
        seq = end + 1
    for _ in range(draw(st.integers(0, 25))):  # new, or queued again by `er retry`
        status = draw(st.sampled_from(["pending"] * 5 + ["running"]))
        earlier = tuple(draw(st.lists(st.integers(1, seq - 1), max_size=2))) if seq > 1 else ()
        out.append(_Queued(seq, seq, status, draw(sizes), None, earlier))
        seq += draw(st.integers(1, 2))  # seqs need not be consecutive (failed ones left out)
    return out


@settings(max_examples=300, deadline=None)
@given(queue=queues(), first_alone=st.booleans())
def test_the_plan_partitions_the_queue_in_order_within_the_rules(
    queue: list[_Queued], first_alone: bool
) -> None:
    groups = plan_groups(queue, first_alone=first_alone)
    assert [b for g in groups for b in g] == queue  # every batch once, in order
    recorded = {b.group_end for b in queue if b.group_end is not None}
    for end in recorded:  # a recorded group comes back exactly
        members = [b for b in queue if b.group_end == end]
        assert members in groups
    for i, group in enumerate(groups):
        if group[0].group_end is not None:
            continue
        assert all(b.group_end is None for b in group)
        if len(group) > 1:  # a batch moved by `er retry` may be in the checkpoint: alone
            assert all(b.status == "pending" and b.n > 0 and not b.earlier for b in group)
            assert sum(b.n for b in group) <= GROUP_MAX_MENTIONS
            assert not (first_alone and i == 0)
        # greedy: the next new batch could not have joined
        if i + 1 < len(groups):
            nxt = groups[i + 1][0]
            fits = sum(b.n for b in group) + nxt.n <= GROUP_MAX_MENTIONS
            joinable = (
                nxt.group_end is None
                and nxt.status == "pending"
                and nxt.n > 0
                and not nxt.earlier
                and all(b.status == "pending" and b.n > 0 and not b.earlier for b in group)
                and not (first_alone and i == 0)
            )
            assert not (fits and joinable)


@settings(max_examples=200, deadline=None)
@given(queue=queues(), first_alone=st.booleans(), data=st.data())
def test_a_prefix_of_the_queue_plans_a_prefix_of_the_steps(
    queue: list[_Queued], first_alone: bool, data: st.DataObject
) -> None:
    # What a budgeted run takes, or a run before more batches arrived, is what one
    # run over everything takes, but for the last step, which may grow.
    cut = data.draw(st.integers(0, len(queue)))
    whole = plan_groups(queue, first_alone=first_alone)
    part = plan_groups(queue[:cut], first_alone=first_alone)
    if not part:
        return
    assert part[:-1] == whole[: len(part) - 1]
    assert whole[len(part) - 1][: len(part[-1])] == part[-1]


def test_a_batch_alone_is_stepped_alone_and_the_first_trains_alone() -> None:
    one = [_Queued(7, 7, "pending", 1000, None)]
    assert plan_groups(one, first_alone=False) == [one]
    backlog = [_Queued(s, s, "pending", 1000, None) for s in range(1, 11)]
    steps = plan_groups(backlog, first_alone=True)
    assert [[b.seq for b in g] for g in steps] == [[1], [2, 3, 4, 5], [6, 7, 8, 9], [10]]
