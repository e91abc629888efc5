"""dfcompass against HolisticTraceAnalysis (traceinsight 0.6.1) on the same Kineto files: time and memory.

Each side runs in a fresh process, from the compressed JSON to the numbers, the two alternating
for ``rounds`` rounds (best of each kept):

* HTA: ``TraceAnalysis(trace_dir)`` (parse), then the temporal and idle-time breakdowns, the kernel
  breakdown, the launch statistics, the queue-length summary and the memory-bandwidth summary;
* dfcompass: ``import-kineto`` of every rank file into a CTF trace, then the same six analyses
  (``breakdown``, ``kernels``, ``launches``, ``queues``, ``bandwidth``) on each.

HTA is never a dependency: give a Python that has it with ``DFCOMPASS_HTA_PYTHON`` (e.g. a scratch
venv: ``python3 -m venv /tmp/tivenv && /tmp/tivenv/bin/pip install traceinsight==0.6.1``); without
it the benchmark says it was skipped. Peak RSS is each child's ``ru_maxrss``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, log, run_child

TRACES = REPO_ROOT.parent / "shared" / "traces" / "kineto"
DIRS = ("hta-simple-add", "hta-sampled-2rank", "hta-nccl-rank0")

HTA_SCRIPT = """
import logging, sys
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
ranks = sorted(a.t.traces)
a.get_temporal_breakdown(visualize=False)
for r in ranks:
    a.get_idle_time_breakdown(ranks=[r], visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
a.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
a.get_queue_length_summary(ranks=ranks)
a.get_memory_bw_summary(ranks=ranks)
"""

OURS_SCRIPT = """
import sys, tempfile
from pathlib import Path
from tc_analyses.inputs import TraceInputs
from tc_analyses.registry import entry
from tracer.importers import import_kineto
with tempfile.TemporaryDirectory() as tmp:
    for i, file in enumerate(sorted(Path(sys.argv[1]).glob("*.json.gz"))):
        out = Path(tmp) / str(i)
        import_kineto(file, out)
        inputs = TraceInputs(out)
        for key in ("breakdown", "kernels", "launches", "queues", "bandwidth"):
            entry(key).run(inputs, entry(key).options())
"""


def run(rounds: int = 3) -> dict[str, Any]:
    hta_python = os.environ.get("DFCOMPASS_HTA_PYTHON", "")
    if not TRACES.is_dir():
        return {"skipped": f"{TRACES} is absent (the shared traces are not part of the project)"}
    if not hta_python or not Path(hta_python).is_file():
        return {"skipped": "set DFCOMPASS_HTA_PYTHON to a Python with traceinsight 0.6.1 (a scratch venv)"}
    results: dict[str, Any] = {"hta_python": hta_python, "rounds": rounds, "traces": {}}
    with tempfile.TemporaryDirectory(prefix="dfc-hta-") as tmp:
        hta_file, ours_file = Path(tmp) / "hta_side.py", Path(tmp) / "ours_side.py"
        hta_file.write_text(HTA_SCRIPT)
        ours_file.write_text(OURS_SCRIPT)
        for name in DIRS:
            best: dict[str, tuple[float, int]] = {}
            for i in range(rounds):
                order = [("hta", [hta_python, str(hta_file)]), ("dfcompass", [sys.executable, str(ours_file)])]
                for side, argv in (order if i % 2 == 0 else order[::-1]):
                    seconds, rss = run_child(argv + [str(TRACES / name)])
                    if side not in best or seconds < best[side][0]:
                        best[side] = (seconds, max(rss, best.get(side, (0, 0))[1]))
            log(f"  {name}: HTA {best['hta'][0]:.2f} s, dfcompass {best['dfcompass'][0]:.2f} s")
            results["traces"][name] = {
                "hta_s": best["hta"][0], "dfcompass_s": best["dfcompass"][0],
                "hta_rss_kib": best["hta"][1], "dfcompass_rss_kib": best["dfcompass"][1],
                "time_ratio_dfcompass_per_hta": best["dfcompass"][0] / best["hta"][0],
                "rss_ratio_dfcompass_per_hta": best["dfcompass"][1] / best["hta"][1],
            }
    return results
