"""The lane plan's own pass must give the placement simulator's schedule, to the nanosecond."""

from __future__ import annotations

import random

import pytest

from tc_analyses.analyses.parallelism.lane_sim import simulate_lanes
from tc_analyses.analyses.parallelism.plan import _lane_name, _problem_from
from tc_analyses.perf.simulate import simulate


def _random_plan(rng: random.Random) -> tuple[list[int], list[int], list[tuple[int, int]], set[tuple[int, int]], int]:
    n = rng.randint(1, 60)
    lanes = rng.choice([1, 2, 3, 12])  # 12: "stream 10" sorts before "stream 2", as the simulator starts them
    lane_of = [rng.randrange(lanes) for _ in range(n)]
    work = [rng.choice([0, 1, 5, 5, 100, rng.randint(0, 3000)]) for _ in range(n)]  # ties: the events' order decides
    edges = sorted({(u, v) for _ in range(rng.randint(0, 3 * n)) for u, v in [sorted(rng.sample(range(n), 2))]}
                   if n > 1 else set())
    rng.shuffle(edges)  # the problem's edge order is the successors' order
    kept = {e for e in edges if lane_of[e[0]] != lane_of[e[1]] and rng.random() < 0.7}
    edges = [e for e in edges if lane_of[e[0]] == lane_of[e[1]] or e in kept]
    return lane_of, work, edges, kept, lanes


@pytest.mark.parametrize("sync", [0, 7, 2_000])
def test_the_same_schedule_as_the_simulator(sync: int) -> None:
    rng = random.Random(sync)
    for _ in range(400):
        lane_of, work, edges, kept, lanes = _random_plan(rng)
        names = [_lane_name("stream", s) for s in range(lanes)]
        problem = _problem_from([("op", f"t{t}", w) for t, w in enumerate(work)], "stream", "gpu", lanes, sync,
                                {e: rng.randint(0, 10**6) for e in edges})
        expected = simulate(problem, {t: names[lane] for t, lane in enumerate(lane_of)}, list(range(len(work))),
                            transfer_override={e: sync for e in kept})
        got = simulate_lanes(lane_of, work, [u for u, _ in edges], [v for _, v in edges], sync, lanes)
        assert got.makespan_ns == expected.makespan_ns
        assert [(s.task, s.start_ns, s.end_ns) for s in expected.schedule] == sorted(
            zip(range(len(work)), got.start_ns, got.end_ns), key=lambda r: (r[1], r[0]))


def test_an_order_against_the_dependencies_is_refused() -> None:
    with pytest.raises(ValueError, match="before its input"):
        simulate_lanes([0, 1], [1, 1], [1], [0], 0, 2)


def test_an_empty_plan_and_lanes_without_syncs() -> None:
    assert simulate_lanes([], [], [], [], 5, 2).makespan_ns == 0
    got = simulate_lanes([0, 1, 0, 1], [3, 4, 5, 6], [0], [2], 100, 2)  # within a lane: no sync
    assert (got.start_ns, got.end_ns, got.makespan_ns) == ([0, 0, 3, 4], [3, 4, 8, 10], 10)


def test_work_past_the_int64_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="2\\^62"):
        simulate_lanes([0, 1], [1 << 61, 1 << 61], [0], [1], 1, 2)
    with pytest.raises(ValueError, match="2\\^62"):  # the syncs alone carry it past
        simulate_lanes([0, 1, 0, 1], [1, 1, 1, 1], [0, 1, 2], [1, 2, 3], 1 << 61, 2)
    huge = simulate_lanes([0, 1], [1, 1], [0], [1], 10**18, 2)  # a large sync that stays inside: planned
    assert huge.makespan_ns == 10**18 + 2


def test_negative_work_is_refused() -> None:
    with pytest.raises(ValueError, match="task 1 has negative work"):
        simulate_lanes([0, 0, 0], [5, -3, 1], [0], [2], 10, 1)
