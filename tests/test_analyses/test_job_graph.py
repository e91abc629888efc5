"""The cross-process critical path and slack on a hand-made two-rank job whose answer is known."""

from __future__ import annotations

from tc_analyses.analyses.job_graph import RankNodes, build_job_graph, critical_path

US = 10_000  # the hand-made times are in units of 10 µs, well above the clock-jitter tolerance


def _rank(rank: int, spans: list[tuple[int, int, str, int]]) -> RankNodes:
    """Nodes 1.. from (start, end, op, tid); node 2 issues collective seq 0."""
    return RankNodes(rank, list(range(1, len(spans) + 1)), [s[3] for s in spans], [s[0] * US for s in spans],
                     [s[1] * US for s in spans], [s[2] for s in spans], [s[2] for s in spans],
                     tensor_edges=[(1, 2)], collectives=[(0, "all_reduce", 2)])


def _job() -> list[RankNodes]:
    # rank 0 computes briefly, arrives at the all-reduce early, waits in gloo's span, then computes long;
    # rank 1 computes long and arrives last. The job's end is rank 0's last node, which waited for rank 1.
    fast = _rank(0, [(0, 10, "aten::mm", 1), (10, 12, "c10d::allreduce_", 1), (12, 52, "gloo:all_reduce", 2),
                     (53, 100, "aten::mm", 1)])
    slow = _rank(1, [(0, 50, "aten::mm", 1), (50, 52, "c10d::allreduce_", 1), (52, 53, "gloo:all_reduce", 2),
                     (54, 60, "aten::add", 1)])
    return [fast, slow]


def test_the_path_crosses_from_the_last_arriver_to_the_rank_that_waited() -> None:
    path = critical_path(build_job_graph(_job(), [(0, "all_reduce", 1)]))
    assert path is not None
    assert [(s.rank, s.node_id, s.via) for s in path.steps] == [
        (1, 1, ""), (1, 2, "tensor"), (0, 3, "collective"), (0, 4, "wait")]
    assert path.crossings == 1
    assert path.length_ns == 100 * US
    # own time on the path: rank 1's 50 + 2, rank 0's span after the last arrival (0) and its 47
    assert path.by_rank_ns == {0: 47 * US, 1: 52 * US}


def test_slack_counts_the_wait_as_free_time() -> None:
    path = critical_path(build_job_graph(_job(), [(0, "all_reduce", 1)]))
    assert path is not None
    slack = {(rank, node): value for rank, node, _, value in path.slack}
    assert slack[(0, 4)] == 0  # the job's last node
    # rank 0's first op could end as late as the last arrival without delaying anything
    assert slack[(0, 1)] == slack[(0, 2)] == 41 * US
    assert slack[(1, 1)] == slack[(1, 2)] == 1 * US  # on the path: only the 10 µs gap before rank 0's last op
    assert slack[(1, 4)] == 40 * US  # rank 1's last op ends at 60, the job at 100


def test_without_a_joined_collective_the_ranks_stay_apart() -> None:
    path = critical_path(build_job_graph(_job(), []))
    assert path is not None and path.crossings == 0
    assert {s.rank for s in path.steps} == {0}
