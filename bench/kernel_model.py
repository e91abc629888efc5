"""The GPU kernel-time model against real A100 kernels (../shared/traces/kineto/hta-sampled-2rank).

Both ranks are imported with ``dfcompass import-kineto`` (input dims kept as dfc:node_args); each op
with shapes is joined to the kernels it launched (tc_analyses/perf/kernel_check.py). Three models
predict the kernel time from the op's shapes, each checked on rank 1:

* the roofline on A100 datasheet peaks, nothing fitted;
* the placement cost model as it charges a GPU op: that roofline plus the 5 us launch constant;
* a calibration fitted on rank 0 only (per op type: a floor and a factor on the roofline).

Printed: the overall median |error| of each, and the calibrated model's error per op type.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, log

from tc_analyses.inputs import TraceInputs
from tc_analyses.perf import kernel_check as kc

TRACES = REPO_ROOT.parent / "shared" / "traces" / "kineto" / "hta-sampled-2rank"


def run() -> dict[str, Any]:
    if not TRACES.is_dir():
        return {"skipped": f"{TRACES} is absent (the shared traces are not part of the project)"}
    from tracer.importers import import_kineto

    ops: dict[int, list[kc.JoinedOp]] = {}
    with tempfile.TemporaryDirectory(prefix="dfc-kernels-") as tmp:
        for rank in (0, 1):
            out = Path(tmp) / f"rank{rank}"
            import_kineto(TRACES / f"sampled_rank-{rank}.json.gz", out)
            inputs = TraceInputs(out)
            ops[rank] = kc.join_kernels(inputs.trace, inputs.whole_activity)  # both steps
            log(f"  rank {rank}: {len(ops[rank])} ops joined to {sum(j.kernels for j in ops[rank])} kernels")
    fitted = kc.calibrate(ops[0])
    return {
        "joined": {str(r): len(v) for r, v in ops.items()},
        "datasheet": kc.overall_median_abs_error(ops[1]),
        "as_used": kc.overall_median_abs_error(ops[1], kc.as_used()),
        "calibrated": kc.overall_median_abs_error(ops[1], fitted),
        "calibrated_in_sample": kc.overall_median_abs_error(ops[0], fitted),
        "floor_ns": fitted.floor_ns,
        "per_op": [row.__dict__ for row in kc.errors(ops[1], fitted, min_count=10)],
        "per_op_datasheet": [row.__dict__ for row in kc.errors(ops[1], min_count=10)],
    }
