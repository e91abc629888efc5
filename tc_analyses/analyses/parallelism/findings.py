"""Findings of a stream plan: each says what it means and what to do."""

from __future__ import annotations

from typing import Any

from tc_analyses.analyses.frameworks import PYTORCH, advice
from tc_analyses.analyses.parallelism import chains
from tc_analyses.analyses.parallelism.result import STREAM, PlannedOps
from tc_analyses.analyses.result import Finding
from tc_analyses.analyses.units import fmt_ms

LOW_GAIN = 1.05  # predicted speedups below this are "no useful parallelism"


def findings(r: dict[str, Any], ops: PlannedOps, framework: str = PYTORCH) -> tuple[Finding, ...]:
    """What the plan `r` means and what to do, the advice in `framework`'s words."""
    gain = max(0, r["baseline_ns"] - r["plan_ns"])  # the time the plan would save per step
    # The first finding is the plan itself; the others advise on it.
    return tuple(Finding("plan", gain, text) if i == 0 else Finding("advice", 0, text)
                 for i, text in enumerate(_texts(r, ops, framework)))


def _texts(r: dict[str, Any], ops: PlannedOps, framework: str) -> list[str]:
    lane, out = r["lane"], []
    n_chains = len(r["chains"])
    out.append(f"{r['nodes']} ops form {n_chains} chain(s); the plan runs them on {r['streams']} {lane}(s) with "
               f"{r['syncs']} sync(s): predicted {r['speedup']:.2f}x ({fmt_ms(r['baseline_ns'])} -> {fmt_ms(r['plan_ns'])}, "
               f"modelled upper bound)")
    if r["nodes"] > 1 and r["edges"] == 0:
        out.append("no dependencies between these ops were recorded (dfc:tensor_edge): they look independent, "
                   "so the plan overstates the parallelism; record with the PyTorch source to get edges")
    if r["width"] is None and r["nodes"] > chains.REDUCTION_LIMIT:
        out.append(f"{r['nodes']} ops exceed {chains.REDUCTION_LIMIT:,}: the transitive reduction and the width were "
                   "skipped (n^2 memory), so the plan may keep syncs that the reduction would drop")
    if r["components"] > 1 and r["edges"]:
        out.append(f"the ops form {r['components']} independent parts (e.g. different models, or several passes "
                   f"folded into one step): overlapping them pays only if they really run in the same step")
    if n_chains == 1:
        out.append("the ops form a single chain: there is no inter-op parallelism to exploit; "
                   "only faster or fused ops shorten the step")
    elif r["speedup"] < 1.0:
        out.append(f"the syncs ({r['sync_ns']} ns each) cost more than the overlap gains: keep one {lane}, "
                   f"or fuse the small ops of the branches first")
    elif r["speedup"] < LOW_GAIN:
        out.append(f"little to gain from more {lane}s (< {LOW_GAIN - 1:.0%}): the critical path holds "
                   f"{r['critical_path_ns'] / max(1, r['total_work_ns']):.0%} of the work")
    else:
        how = ("run each chain on its own CUDA stream with event record/wait on the sync edges (or capture it in "
               f"{advice('graph_capture', framework)})" if lane == STREAM else
               f"{advice('thread_chains', framework)}, each with {advice('intra_op_threads', framework)} "
               "of its share of the cores, joined on the sync edges")
        out.append(f"to realise it: {how}; the JSON lists each op's {lane}, its order and the events it waits on")
    if n_chains > r["max_streams"]:
        out.append(f"{n_chains} chains were merged onto {r['max_streams']} {lane}s (heaviest chain onto the least "
                   f"loaded {lane}); allow up to {n_chains} {lane}s for full logical concurrency")
    if r["critical_path_ns"] and r["speedup"] < 0.8 * r["ideal_speedup"]:
        out.append(f"the plan reaches {r['speedup']:.2f}x of the {r['ideal_speedup']:.2f}x bound (work / critical "
                   f"path): syncs and lane merging cost the rest")
    if r["ideal_speedup"] > 1.0 and r["critical_path"]:
        work = ops.column("work_ns")
        critical = [row for row, on in enumerate(ops.column("on_critical_path")) if on]
        on_cp = [ops[row] for row in sorted(critical, key=lambda row: -work[row])[:3]]
        names = ", ".join(f"{o.name or o.op} ({o.op}, {fmt_ms(o.work_ns)})" for o in on_cp)
        out.append(f"the critical path ({fmt_ms(r['critical_path_ns'])}, {len(r['critical_path'])} ops) caps the "
                   f"speedup at {r['ideal_speedup']:.2f}x; shorten its longest ops: {names}")
    if r["unattributed_ns"]:
        out.append(f"{fmt_ms(r['unattributed_ns'])} of GPU time was launched outside any recorded op and is not planned")
    return out
