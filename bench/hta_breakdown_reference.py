"""Cross-check dfcompass's temporal and idle-time breakdowns against HolisticTraceAnalysis (HTA).

Not part of ``make bench`` or the tests: this is how the reference numbers in
``tests/test_analyses/test_breakdown.py`` were obtained (HTA 0.6.1, published as traceinsight;
first with 0.5.0). For each rank file of a Kineto trace directory it prints, side by side (µs):

* HTA's ``get_temporal_breakdown`` and ``get_idle_time_breakdown`` (``consecutive_kernel_delay=30``,
  its default), as is and with the ``cuda_sync`` slices removed (HTA counts them as GPU time, and
  so does dfcompass since it imports them as dfc:sync_begin/_end),
* dfcompass's :func:`temporal_breakdown` / :func:`idle_breakdown` on the imported file, in ns as
  recorded and with HTA's whole-µs reading (:func:`round_like_hta`).

HTA and dfcompass need not share an environment::

    .venv/bin/python bench/hta_breakdown_reference.py --hta-python /tmp/htavenv/bin/python \\
        ../shared/traces/kineto/hta-nccl-rank0

runs the HTA half as ``HTA_PYTHON bench/hta_breakdown_reference.py --hta-only DIR`` (JSON on stdout); when
``hta`` is importable here no second interpreter is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import hta_arguments  # bench/ is on the path of a script run from it

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPORAL = ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")


# ------------------------------------------------------------------------------------- HTA side
def hta_numbers(trace_dir: str) -> dict[str, Any]:
    """{rank: {"file", "temporal", "temporal_without_cuda_sync", "idle"}} from HTA (needs ``hta``)."""
    import logging

    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis

    def temporal(analysis: Any) -> dict[int, list[float]]:
        table = analysis.get_temporal_breakdown(visualize=False)
        return {int(row["rank"]): [float(row[c]) for c in TEMPORAL] for _, row in table.iterrows()}

    analysis = TraceAnalysis(trace_dir=trace_dir)
    as_is = temporal(analysis)
    idle: dict[int, list[list[Any]]] = {}
    for rank in sorted(analysis.t.traces):
        table = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False, consecutive_kernel_delay=30)[0]
        idle[rank] = [[int(r["stream"]), str(r["idle_category"]), float(r["idle_time"])] for _, r in table.iterrows()]
    sync = analysis.t.symbol_table.get_sym_id_map().get("cuda_sync")
    for rank, frame in list(analysis.t.traces.items()):
        analysis.t.traces[rank] = frame[frame["cat"].ne(sync)]
    without_sync = temporal(analysis)
    return {str(rank): {"file": str(analysis.t.trace_files[rank]), "temporal": as_is[rank],
                        "temporal_without_cuda_sync": without_sync[rank], "idle": idle[rank]}
            for rank in sorted(as_is)}


def run_hta(trace_dir: str, hta_python: str | None) -> dict[str, Any]:
    try:
        import hta  # noqa: F401
    except ImportError:
        if not hta_python:
            raise SystemExit("hta is not importable here: pass --hta-python PATH (a Python with hta installed)")
        done = subprocess.run([hta_python, __file__, "--hta-only", trace_dir], check=True, capture_output=True,
                              text=True)
        return json.loads(done.stdout)[trace_dir]  # type: ignore[no-any-return]
    return hta_numbers(trace_dir)


# -------------------------------------------------------------------------------- dfcompass side
def ours(kineto_file: str) -> dict[str, Any]:
    sys.path.insert(0, str(REPO_ROOT))
    from tc_analyses.analyses.breakdown import idle_breakdown, read_like_hta, temporal_breakdown
    from tc_analyses.model.activity import read_activity
    from tc_analyses.reader import read_trace
    from tracer.importers import import_kineto

    with tempfile.TemporaryDirectory() as tmp:
        import_kineto(kineto_file, Path(tmp) / "trace")
        trace = read_trace(Path(tmp) / "trace")
        activity = read_activity(trace)
    result = {}
    for label, act in (("ns", activity), ("hta_us", read_like_hta(activity, trace))):
        t = temporal_breakdown(act, trace).total
        idle = idle_breakdown(act, trace)
        result[label] = {
            "temporal": [t.idle_ns / 1e3, t.compute_ns / 1e3, t.non_compute_ns / 1e3, t.kernel_time_ns / 1e3],
            "idle": [[q.queue, c, getattr(q, f"{c}_ns") / 1e3] for q in idle.queues
                     for c in ("host_wait", "kernel_wait", "other")],
        }
    return result


def main() -> None:
    args = hta_arguments(__doc__, "Kineto trace directories (one JSON file per rank)").parse_args()
    if args.hta_only:
        print(json.dumps({d: hta_numbers(d) for d in args.trace_dirs}))
        return
    for trace_dir in args.trace_dirs:
        for rank, ref in run_hta(trace_dir, args.hta_python).items():
            mine = ours(ref["file"])
            print(f"{trace_dir} rank {rank} ({Path(ref['file']).name}), µs")
            print(f"  {'':34}{'idle':>14}{'compute':>14}{'non_compute':>14}{'kernel_time':>14}")
            for label, row in (("HTA (traceinsight)", ref["temporal"]), ("HTA without cuda_sync", ref["temporal_without_cuda_sync"]),
                               ("dfcompass (ns)", mine["ns"]["temporal"]),
                               ("dfcompass (HTA µs reading)", mine["hta_us"]["temporal"])):
                print(f"  {label:34}" + "".join(f"{v:14.3f}" for v in row))
            theirs = {(s, c): v for s, c, v in ref["idle"]}
            print(f"  {'stream':>8} {'category':12}{'HTA':>14}{'ours (ns)':>14}{'ours (µs)':>14}")
            for (queue, cat, value), (_, _, rounded) in zip(mine["ns"]["idle"], mine["hta_us"]["idle"]):
                hta_value = theirs.get((queue, cat))
                shown = f"{hta_value:14.3f}" if hta_value is not None else f"{'-':>14}"
                print(f"  {queue:>8} {cat:12}{shown}{value:14.3f}{rounded:14.3f}")


if __name__ == "__main__":
    main()
