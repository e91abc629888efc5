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


def test_the_sync_price_against_items_measured_on_an_h200() -> None:
    """`loss.item()` in the H200 training run (tests/data/traces/cuda/h200-mlp): once the GPU queue
    drained, each item took 18.8-19.2 us more (the 4-byte copy 1.6 us of it). The model's price of an
    item on that card, set before this was measured: its launch, the copy over PCIe, the sync."""
    from pathlib import Path

    from tc_analyses.model.activity import read_activity
    from tc_analyses.perf.cost import estimate_op, modelled_ns
    from tc_analyses.perf.devices import default_link
    from tc_analyses.reader import read_trace

    cpu, gpu = parse_devices("cpu,cuda:0=H200")
    modelled = modelled_ns(estimate_op("aten::item", "[[]]", "float"), gpu) + default_link(gpu, cpu).time_ns(4) + SYNC_WAIT_NS
    activity = read_activity(read_trace(Path(__file__).resolve().parents[1] / "data" / "traces" / "cuda" / "h200-mlp" / "trace"))
    copies = [g for g in activity.gpu if g.kind == "memcpy"]
    after_drain = []
    for item in (r for r in activity.nodes if r.op == "aten::item" and r.outermost):
        copy = max((c for c in copies if item.start <= c.start <= item.end), key=lambda c: c.start)
        drained = max(g.end for g in activity.gpu if g.end <= copy.start)
        if drained > item.start:  # the host waited for the queue: what follows is the sync's own cost
            after_drain.append(item.end - drained)
    assert len(after_drain) >= 2
    assert all(0.5 * modelled <= ns <= 1.5 * modelled for ns in after_drain), (modelled, after_drain)
