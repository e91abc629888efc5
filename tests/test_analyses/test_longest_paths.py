"""The plan's longest paths a level at a time equal the per-task loops they stand in for.

:mod:`tc_analyses.analyses.parallelism.longest_paths` takes the upward ranks and the earliest
starts one level of the DAG at a time; the loops (``model.dag.upward_rank`` and
``chains.peak_concurrency``) stay for deep DAGs. Both are run on random DAGs, shallow and deep,
and a plan made each way is the same plan.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tc_analyses.analyses.parallelism import chains as decompose
from tc_analyses.analyses.parallelism import longest_paths, plan_trace
from tc_analyses.analyses.parallelism.plan_dag import successor_lists
from tc_analyses.inputs import TraceInputs
from tc_analyses.model.dag import upward_rank

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def _random_dag(rng: np.random.Generator, n: int, chain: bool) -> tuple[np.ndarray, np.ndarray]:
    m = int(rng.integers(0, 3 * n + 1)) if n > 1 else 0
    u, v = rng.integers(0, max(n, 1), m), rng.integers(0, max(n, 1), m)
    keys = set((u[u < v] * n + v[u < v]).tolist())
    if chain:  # a path through every task: n levels
        keys |= {t * n + t + 1 for t in range(n - 1)}
    ordered = np.array(sorted(keys), dtype=np.int64)
    return ordered // max(n, 1), ordered % max(n, 1)


def _starts_by_loop(work: list[int], succ: list[list[int]]) -> list[int]:
    start = [0] * len(work)
    for t in range(len(work)):
        for s in succ[t]:
            start[s] = max(start[s], start[t] + work[t])
    return start


@pytest.mark.parametrize("chain", [False, True])
def test_ranks_and_starts_equal_the_loops(chain: bool) -> None:
    rng = np.random.default_rng(7 + chain)
    for _ in range(300):
        n = int(rng.integers(0, 90))
        tails, heads = _random_dag(rng, n, chain)
        work = rng.choice([0, 1, 5, 1_000, 1 << 40], n).astype(np.int64)
        succ = successor_lists(n, tails, heads)
        level = longest_paths.levels(n, tails, heads, limit=n + 1)
        assert level is not None
        assert all(level[u] < level[v] for u, v in zip(tails.tolist(), heads.tolist()))
        expected = list(upward_rank(range(n), work.tolist(), succ).values())[::-1]
        assert longest_paths.upward_ranks(level, work, tails, heads).tolist() == expected
        starts = longest_paths.earliest_starts(level, work, tails, heads)
        assert starts.tolist() == _starts_by_loop(work.tolist(), succ)
        assert decompose.peak_of(starts, work) == decompose.peak_concurrency(work.tolist(), succ)


def test_a_deep_dag_is_left_to_the_loops() -> None:
    n = 200
    tails, heads = np.arange(n - 1), np.arange(1, n)  # one chain: 200 levels
    assert longest_paths.levels(n, tails, heads) is None  # past n // 32
    assert longest_paths.levels(n, tails, heads, limit=n).max() == n - 1  # type: ignore[union-attr]


@pytest.mark.parametrize("trace", ["tf/keras-cnn", "cuda/h200-eager/convnet-cpu/trace"])
def test_a_plan_by_levels_equals_the_plan_by_loops(trace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / trace
    inputs = TraceInputs(path)
    by_levels = repr(plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity))
    monkeypatch.setattr(longest_paths, "TASKS_PER_LEVEL", 1)
    wide = repr(plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity))
    monkeypatch.setattr(longest_paths, "levels", lambda *args, **kwargs: None)
    by_loops = repr(plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity))
    assert by_levels == wide == by_loops


def test_negative_work_is_refused_with_the_graphs_name() -> None:
    """A lane's ops run back to back only when none ends before it starts: negative durations
    (a damaged trace, or weights given so) are refused in one line, not planned."""
    import networkx as nx

    from tc_analyses.errors import AnalysisUnavailable
    from tc_analyses.analyses.parallelism import plan_streams

    g: nx.DiGraph = nx.DiGraph()
    g.add_nodes_from(range(4))
    g.add_edge(0, 3)
    with pytest.raises(AnalysisUnavailable, match="negative"):
        plan_streams(g, weights={0: -5, 1: -3, 2: 4, 3: 1}, sync_ns=10, max_streams=1)
