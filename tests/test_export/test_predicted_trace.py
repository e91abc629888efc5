"""The predicted schedule's trace is written a column per field; it must be the trace that adding
its events one at a time writes, file for file and byte for byte."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tc_analyses.analyses.placement.generate import random_layered
from tc_analyses.analyses.placement.heft import list_schedule
from tc_analyses.export.placement_views import _KEPT_TID, _MOVED_TID, plan_trace_builder, write_predicted_trace
from tc_analyses.perf.problem import Placement, PlacementProblem


def _one_event_at_a_time(out: Path, problem: PlacementProblem, plan: Placement, start_ns: int, offset: int) -> None:
    """The reference: the predicted trace as a loop of TraceBuilder.add calls (the writer before columns)."""
    tasks = {t.id: t for t in problem.tasks}
    index = {d.name: i for i, d in enumerate(problem.devices)}
    with plan_trace_builder(out, problem, plan, start_ns, offset) as builder:  # the header: not under test
        end_of = {}
        for slot in sorted(plan.schedule, key=lambda s: (s.start_ns, s.task)):
            task = tasks[slot.task]
            moved = task.actual_device is not None and task.actual_device != slot.device
            tid = (_MOVED_TID if moved else _KEPT_TID) + index[slot.device]
            device_index = builder.device(slot.device, start_ns)
            label = f"{task.name} (from {task.actual_device})" if moved else task.name
            builder.add("node_begin", f"t{tid}", start_ns + slot.start_ns, task.id, task.op, label, device_index, tid, 0)
            builder.add("node_end", f"t{tid}", start_ns + slot.end_ns, task.id, device_index, tid)
            end_of[task.id] = (start_ns + slot.start_ns, slot.device, tid)
        for (u, v), nbytes in sorted(problem.edges.items()):
            if u in end_of and v in end_of:
                begin, dst, tid = end_of[v]
                builder.add("tensor_edge", f"t{tid}", begin, u, v, v, nbytes,
                            builder.device(end_of[u][1], start_ns), builder.device(dst, start_ns))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_columns_write_the_trace_one_event_at_a_time_writes(tmp_path: Path) -> None:
    for seed in range(4):
        problem = random_layered(60 + 40 * seed, 3, seed)
        names = problem.device_names()
        # Some tasks ran elsewhere (a "moved here" row), some share names and ops (interning), one odd name.
        tasks = [dataclasses.replace(t, actual_device=names[(t.id * (seed + 1)) % 3] if t.id % 4 else None,
                                     name=f"n<{t.id % 7}>&\"é" if t.id % 5 == 0 else t.name, op=f"op{t.id % 3}")
                 for t in problem.tasks]
        problem = dataclasses.replace(problem, tasks=tasks)
        plan = list_schedule(problem, {t.id: names[(t.id + seed) % 3] for t in tasks}, algorithm="test")
        plan.schedule = [s for s in plan.schedule if s.task % 11 != 3]  # edges to an unscheduled task are left out
        ours, reference = tmp_path / f"ours{seed}", tmp_path / f"reference{seed}"
        write_predicted_trace(ours, problem, plan, 1_000 + seed, 7 * seed)
        _one_event_at_a_time(reference, problem, plan, 1_000 + seed, 7 * seed)
        assert _files(ours) == _files(reference)
        assert len(_files(ours)) > 8
