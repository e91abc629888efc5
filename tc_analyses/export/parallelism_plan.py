"""A stream plan (inter-operator parallelism) as JSON-ready data and as text: what the report, the
views written beside it and `--format json` all give, in one place."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tc_analyses.analyses.parallelism import StreamPlan
from tc_analyses.analyses.result import one_level
from tc_analyses.analyses.units import fmt_ms

MAX_ROWS = 40  # ops listed per lane in the text


def plan_json(plan: StreamPlan) -> dict[str, Any]:
    """The plan as JSON-ready data (what ``dataclasses.asdict`` gives, node ids kept as they are):
    the dataclasses inside are converted as the encoder meets them, the ops from their columns."""
    data: dict[str, Any] = json.loads(json.dumps(one_level(plan), default=one_level))
    return data


def plan_text(plan: StreamPlan) -> str:
    """The plan as text: the numbers, each lane's ops in order with the events they wait on, findings."""
    lane = plan.lane
    # Dilworth's width is skipped on closures past WIDTH_PAIR_LIMIT pairs or WIDTH_BUDGET_S seconds
    width = "not computed (graph too large for the exact width)" if plan.width is None else str(plan.width)
    lines = [
        f"trace:      {plan.source or '-'}",
        f"device:     {plan.device} ({plan.nodes} ops, weighted by {plan.work}; {lane}s)",
        f"graph:      {plan.edges} dependencies, {plan.reduced_edges} after transitive reduction; "
        f"width {width}, up to {plan.peak_concurrency} ops at once",
        f"chains:     {len(plan.chains)} (= {plan.nodes} ops - {plan.matching} matched edges)",
        f"plan:       {plan.streams} {lane}(s) (max {plan.max_streams}), {plan.syncs} sync(s) of {plan.sync_ns} ns"
        + (f", {plan.redundant_syncs} implied by {lane} order" if plan.redundant_syncs else ""),
        f"work:       {fmt_ms(plan.total_work_ns)}; critical path {fmt_ms(plan.critical_path_ns)} "
        f"({len(plan.critical_path)} ops); bound work/critical path {plan.ideal_speedup:.2f}x",
        f"baseline:   {fmt_ms(plan.baseline_ns)} (one {lane}, recorded order)",
        f"predicted:  {fmt_ms(plan.plan_ns)} (simulated plan)",
        f"speedup:    {plan.speedup:.2f}x",
        f"model:      {plan.model}",
        "",
        f"{lane}s:",
    ]
    lines += [f"  {s.label}: {s.ops} ops, {fmt_ms(s.work_ns)} of work, {len(s.chains)} chain(s)" for s in plan.lanes]
    lines += ["", f"ops per {lane} (order, op, name, work, waits on):"]
    stream = np.asarray(plan.ops.column("stream"), dtype=np.int64)  # the ops' rows: only the ops listed are made
    position = np.asarray(plan.ops.column("order"), dtype=np.int64)
    for s in plan.lanes:
        mine = np.flatnonzero(stream == s.stream)
        rows = mine[np.argsort(position[mine], kind="stable")].tolist()
        lines.append(f"  {s.label}:")
        for op in map(plan.ops.__getitem__, rows[:MAX_ROWS]):
            waits = ", ".join(f"event({w})" for w in op.waits_for)
            mark = " *" if op.on_critical_path else ""
            lines.append(f"    {op.order:4d}  node {op.node}  {op.op}  {op.name}  {op.work_ns / 1e3:.1f} us{mark}"
                         + (f"  waits on {waits}" if waits else "") + ("  records event" if op.records_event else ""))
        if len(rows) > MAX_ROWS:
            lines.append(f"    ... {len(rows) - MAX_ROWS} more (all in the JSON)")
    lines += ["  (* on the critical path; event(N) is recorded after node N on its own "
              f"{lane})", "", "findings:"] + [f"  - {f.text}" for f in plan.findings]
    return "\n".join(lines) + "\n"
