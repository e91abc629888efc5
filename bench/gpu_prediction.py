"""GPU predictions made from CPU traces, against the same programs run on the GPU (an H200).

tests/gpu_programs/eager_programs.py recorded three eager training programs (a CNN, a transformer
encoder, a recommender) on the CPU and on an H200 of the same machine, and timed their steps
untraced on both (tests/data/traces/cuda/h200-eager; tests/gpu_programs/run_predict_and_compile.sh).
For each program, with nothing fitted on it:

* the kernel model is calibrated on the other two programs' kernels and checked on its own
  (median |error|: datasheet roofline, the model as the planner charges it, calibrated);
* every op is placed on the GPU, costed from the CPU trace as ``recommend-placement`` costs it,
  and list-scheduled: the predicted step, with the range from p10-p90 measured costs and the
  kernel model's p10-p90 error measured on the other two programs, against the measured untraced
  step (median, p10-p90 of 20);
* per op class, one step's predicted GPU time and host time against the GPU run's kernels and
  host spans (the GPU run was traced: its host spans include the profiler's cost).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _common import REPO_ROOT

from tc_analyses.analyses.placement import gpu_prediction as gp

RUNS = REPO_ROOT / "tests" / "data" / "traces" / "cuda" / "h200-eager"
PROGRAMS = ("convnet", "encoder", "recommender")


def run() -> dict[str, Any]:
    if not (RUNS / "convnet-cuda" / "trace").is_dir():
        return {"skipped": f"{RUNS} is absent"}
    rotation = gp.kernel_model_rotation({name: RUNS / f"{name}-cuda" for name in PROGRAMS})
    programs = []
    for name in PROGRAMS:
        error = gp.error_quantiles([e for r in rotation if r["held_out"] != name for e in r["as_used_errors"]])
        check = gp.check_program(name, RUNS / f"{name}-cpu", RUNS / f"{name}-cuda", error)
        programs.append({"name": name, "model_error": error, "predicted_ms": check.predicted_step_ms,
                         "range_ms": check.predicted_range_ms, "measured_ms": check.measured_gpu.median_ms,
                         "measured_p10_p90_ms": (check.measured_gpu.p10_ms, check.measured_gpu.p90_ms),
                         "cpu_ms": check.measured_cpu.median_ms, "holds": check.holds(),
                         "step_error": check.step_error, "predicted_speedup": check.predicted_speedup,
                         "measured_speedup": check.measured_speedup,
                         "rows": [row.__dict__ for row in check.rows[:6]]})
    return {"rotation": [{k: v for k, v in r.items() if k != "as_used_errors"} for r in rotation],
            "programs": programs}
