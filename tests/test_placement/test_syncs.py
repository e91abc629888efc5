"""Sync-bearing ops moved to a GPU are priced as syncs (issue 33: `aten::item` in `Adam.step` moved
to the GPU at 5 us): the device-to-host copy of what they output, a synchronisation, and the host
thread held for all of it."""

from __future__ import annotations

import networkx as nx

from tc_analyses.analyses.placement.heft import list_schedule
from tc_analyses.model import graph_keys as K
from tc_analyses.perf.cost import build_problem
from tc_analyses.perf.devices import parse_devices
from tc_analyses.perf.syncs import SYNC_WAIT_NS, is_sync


def _graph() -> nx.DiGraph:
    """A small CPU step: mm -> sum -> item, and a second mm that reads the sum, not the item."""
    g = nx.DiGraph()
    ops = [("aten::mm", "[[64, 64], [64, 64]]", "float,float"), ("aten::sum", "[[64, 64]]", "float"),
           ("aten::item", "[[]]", "float"), ("aten::mm", "[[64, 64], [64, 64]]", "float,float")]
    for i, (op, shapes, dtypes) in enumerate(ops):
        g.add_node(i, **{K.OP: op, K.NAME: f"n{i}", K.DEVICE: "cpu", K.MEDIAN_NS: 20_000, K.MEAN_NS: 20_000,
                         K.MEASURED: {"cpu": True}, K.INPUT_SHAPES: shapes, K.INPUT_DTYPES: dtypes})
    g.add_edge(0, 1, **{K.BYTES: 64 * 64 * 4})
    g.add_edge(1, 2, **{K.BYTES: 4})
    g.add_edge(1, 3, **{K.BYTES: 4})
    return g


def test_which_ops_are_syncs() -> None:
    assert is_sync("aten::item") and is_sync("aten::_local_scalar_dense") and is_sync("aten::nonzero")
    assert is_sync("aten::index.Tensor", "float,bool") and not is_sync("aten::index.Tensor", "float,long")
    assert not is_sync("aten::add_") and not is_sync("aten::sum")


def test_an_item_on_the_gpu_costs_a_copy_and_a_wait_and_holds_the_host() -> None:
    problem = build_problem(_graph(), parse_devices("cpu,cuda:0=H100"))
    item_gpu = problem.costs[(2, "cuda:0")]
    sum_gpu = problem.costs[(1, "cuda:0")]
    assert item_gpu.ns >= sum_gpu.ns - 1_000 + SYNC_WAIT_NS  # the modelled op, plus the copy and the wait
    assert (2, "cuda:0") in problem.blocking and (1, "cuda:0") not in problem.blocking
    assert problem.host(2, "cuda:0") == problem.cost(2, "cuda:0")  # the host waits for all of it
    assert problem.costs[(2, "cpu")].ns == 20_000  # on the CPU, where it ran: its measured time
    # With the host thread shared (as a trace gives it), no other op is issued while the item waits.
    from dataclasses import replace

    shared = replace(problem, host_ns={"cpu": 2_000, "cuda:0": 2_000})
    placement = list_schedule(shared, {0: "cuda:0", 1: "cuda:0", 2: "cuda:0", 3: "cpu"}, priority=[0, 1, 2, 3])
    slots = {s.task: s for s in placement.schedule}
    item = slots[2]
    for task in (0, 1, 3):
        held = (slots[task].start_ns, slots[task].start_ns + shared.host(task, slots[task].device))
        assert held[1] <= item.start_ns or held[0] >= item.end_ns, (task, held, item)
    unblocked = list_schedule(replace(shared, blocking=frozenset()), {0: "cuda:0", 1: "cuda:0", 2: "cuda:0", 3: "cpu"},
                              priority=[0, 1, 2, 3])
    assert {s.task: s for s in unblocked.schedule}[3].start_ns < item.end_ns  # priced as a launch, it overlapped


def test_recommend_says_why_a_sync_costs_what_it_does() -> None:
    from tc_analyses.analyses.placement.recommend import _reason

    problem = build_problem(_graph(), parse_devices("cpu,cuda:0=H100"))
    task = next(t for t in problem.tasks if t.id == 2)
    assert "a sync: device-to-host copy and a wait for the queue" in _reason(problem, task, "cpu", "cuda:0")
