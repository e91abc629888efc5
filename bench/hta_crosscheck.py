"""dfcompass against HolisticTraceAnalysis (HTA) on Kineto traces we have not seen: a trace x analysis table.

Not part of ``make bench`` or the tests: the traces are public files kept outside the repository
(issue 36), one folder per trace (HTA reads every rank file of a folder). The corpus of
docs/hta.md came from four sources, each file taken from the repository with ``git show``:

* HTA's own test data (github.com/facebookresearch/HolisticTraceAnalysis, ``tests/data``);
* the TensorBoard plugin's 2021 samples (github.com/pytorch/kineto, ``tb_plugin/samples``, in its
  history);
* TraceLens's test traces (github.com/AMD-AGI/TraceLens, ``tests/traces``: H100, B200, MI210, MI300,
  inference servers, torch.compile);
* PARAM's replay inputs (github.com/facebookresearch/param, ``et_replay/tests/inputs``: the
  ``*_kineto.json.gz`` files and the 8 ranks of ``dlrm_kineto.tar.gz``).

Then::

    python3 -m venv /tmp/tivenv && /tmp/tivenv/bin/pip install traceinsight==0.6.1
    .venv/bin/python bench/hta_crosscheck.py --hta-python /tmp/tivenv/bin/python CORPUS/*

For each folder, HTA (traceinsight 0.6.1, in its own interpreter, a process per folder) and
dfcompass (``import_kineto``, then the analyses on the imported trace, with HTA's whole-µs reading
of ns stamps, :func:`round_like_hta`) give, per rank file:

* the import: ``ok``, or dfcompass's one-line refusal;
* ``temporal``: idle, compute, non-compute and kernel time (``get_temporal_breakdown``);
* ``types``: GPU time per kernel type and overlap of types (``get_gpu_kernel_breakdown``);
* ``launches``: the number of launch calls paired with their GPU work (``get_cuda_kernel_launch_stats``);
* ``queues``: per stream, the queue length's count, max and quartiles (``get_queue_length_time_series``);
* ``overlap``: the share of communication time that overlaps compute (``get_comm_comp_overlap``).

A cell is ``match`` (every figure within 1 µs, or equal counts), ``differs on purpose`` or
``HTA's bug`` (each only when the figure equals HTA's once the documented difference is undone on
one side: HTA's launch lists, MTIA as HTA reads it, launches first at ties, the stream arg of
cpu_ops removed and HTA run again...), ``differ`` (with the largest difference), ``HTA fails``
(its error), ``dfcompass fails`` (ours), or ``-`` (nothing to compare: no GPU work on either side). The table goes to stdout, the numbers to bench/out/hta_crosscheck.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from _common import hta_arguments  # bench/ is on the path of a script run from it

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPORAL = ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")
TOLERANCE_US = 1.0
ANALYSES = ("temporal", "types", "launches", "queues", "overlap")  # the table's columns after the import
# the calls HTA 0.6.1 pairs with GPU work: launch statistics (cuda_kernel_analysis.py) and the
# queue-length series (trace_symbol_table.get_runtime_launch_events_mask); dfcompass pairs more
HTA_LAUNCH_STATS_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                                    "runFunction - job_prep_and_submit_for_execution"})
HTA_QUEUE_CALLS = HTA_LAUNCH_STATS_CALLS | frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel",
                                                      "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync",
                                                      "hipMemcpyWithStream"})
_HTA_TYPES = {"compute": "COMPUTATION", "communication": "COMMUNICATION", "memory": "MEMORY", "other": "OTHER"}


# ------------------------------------------------------------------------------------- HTA side
def hta_numbers(trace_dir: str) -> dict[str, Any]:
    """Per rank file: HTA's numbers, or the error each analysis raised (needs ``hta``)."""
    import logging

    logging.disable(logging.CRITICAL)
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=trace_dir)
    out: dict[str, Any] = {str(rank): {"file": Path(str(analysis.t.trace_files[rank])).name}
                           for rank in sorted(analysis.t.traces)}

    def attempt(key: str, compute: Any) -> None:
        try:
            for rank, value in compute().items():
                out[str(rank)][key] = value
        except Exception as error:  # HTA's own failure is a result here
            for rank in out:
                out[rank][key] = f"HTA fails: {type(error).__name__}: {str(error)[:120]}"

    def temporal() -> dict[int, list[float]]:
        table = analysis.get_temporal_breakdown(visualize=False)
        return {int(row["rank"]): [float(row[c]) for c in TEMPORAL] for _, row in table.iterrows()}

    def types() -> dict[int, dict[str, float]]:
        # HTA sums the types over the folder's ranks: each rank gets the folder's sums
        table, _ = analysis.get_gpu_kernel_breakdown(visualize=False, num_kernels=10, duration_ratio=0.8,
                                                     include_memory_kernels=True)
        sums = {str(row["kernel_type"]): float(row["sum"]) for _, row in table.iterrows()}
        return {int(r): sums for r in out}

    def launches() -> dict[int, int]:
        return {int(rank): int(len(frame)) for rank, frame in
                analysis.get_cuda_kernel_launch_stats(ranks=[int(r) for r in out], visualize=False).items()}

    def queue_lengths() -> dict[int, dict[str, list[float]]]:
        series = analysis.get_queue_length_time_series(ranks=[int(r) for r in out])
        found: dict[int, dict[str, list[float]]] = {int(r): {} for r in out}
        for rank, frame in series.items():
            for stream, part in frame.groupby("stream"):
                d = part["queue_length"].describe()
                found[int(rank)][str(int(stream))] = [float(d[k]) for k in ("count", "max", "25%", "50%", "75%")]
        return found

    def overlap() -> dict[int, float]:
        table = analysis.get_comm_comp_overlap(visualize=False)
        return {int(r["rank"]): round(float(r["comp_comm_overlap_pctg"]), 2) for _, r in table.iterrows()}

    attempt("temporal", temporal)
    attempt("types", types)
    attempt("launches", launches)
    attempt("queues", queue_lengths)
    attempt("overlap", overlap)
    return out


def run_hta(trace_dir: str, hta_python: str, timeout_s: int) -> dict[str, Any] | str:
    try:
        done = subprocess.run([hta_python, __file__, "--hta-only", trace_dir], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"HTA fails: no answer in {timeout_s} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return f"HTA fails: {last[:160]}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# -------------------------------------------------------------------------------- dfcompass side
def ours(kineto_file: Path, hta_view: bool = False) -> dict[str, Any]:
    """dfcompass's numbers for one rank file, in HTA's µs and reading; a refusal is a result.
    `hta_view`: a copy already trimmed to what HTA reads (no further variants)."""
    sys.path.insert(0, str(REPO_ROOT))
    from tc_analyses.analyses.breakdown import read_like_hta, temporal_breakdown
    from tc_analyses.analyses.kernels import comm_comp_overlap, type_times
    from tc_analyses.analyses.queues import QUEUE_LAUNCHES, queue_series
    from tc_analyses.analyses.queues import summarize as summarize_queue
    from tc_analyses.analyses.launches import launches
    from tc_analyses.errors import DfcompassError
    from tc_analyses.model.activity import read_activity
    from tc_analyses.model.window import Window, restrict
    from tc_analyses.reader import read_trace
    from tracer.importers import KinetoImportError, import_kineto

    with tempfile.TemporaryDirectory() as tmp:
        try:
            summary = import_kineto(kineto_file, Path(tmp) / "trace")
        except KinetoImportError as error:
            return {"import": f"refused: {str(error).split(': ', 1)[-1][:160]}"}
        trace = read_trace(Path(tmp) / "trace")
        activity = read_like_hta(read_activity(trace), trace)
    shapes = _hta_shapes(kineto_file)
    result: dict[str, Any] = {"import": "ok", "notes": summary.notes[:-1], **shapes}
    if (shapes["mtia_dma_without_stream"] or shapes["mtia_waits"]) and not hta_view:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "as_hta.json"
            copy.write_text(json.dumps({**shapes.pop("_doc"), "traceEvents": _as_hta_reads_mtia(shapes.pop("_events"))}))
            as_hta = ours(copy, hta_view=True)
        result["as_hta_reads_mtia"] = {k: as_hta.get(k) for k in ("temporal", "types")}
    result.pop("_doc", None)
    result.pop("_events", None)
    try:
        t = temporal_breakdown(activity, trace).total
        result["temporal"] = [t.idle_ns / 1e3, t.compute_ns / 1e3, t.non_compute_ns / 1e3, t.kernel_time_ns / 1e3]
        # device-wide syncs put on a queue, as HTA has them when their stream is 4294967295 (docs/hta.md)
        queue = activity.syncs.column("queue")
        as_hta = replace(activity, syncs=activity.syncs.with_columns(queue=np.where(queue == -1, 2**32 - 1, queue)))
        t = temporal_breakdown(as_hta, trace).total
        result["temporal_syncs_on_a_queue"] = [t.idle_ns / 1e3, t.compute_ns / 1e3, t.non_compute_ns / 1e3,
                                               t.kernel_time_ns / 1e3]
    except DfcompassError as error:
        result["temporal"] = f"none: {str(error)[:120]}"
    kept, _ = restrict(activity, Window())
    result["types"] = {" overlapping ".join(_HTA_TYPES[part] for part in label.split(" overlapping ")): ns / 1e3
                       for label, ns in ((t.label, t.time_ns) for t in type_times(kept.gpu))}
    paired = launches(kept)  # HTA counts copy and memset launches too
    result["launches"] = len(paired)
    result["launches_hta_calls"] = sum(1 for launch in paired if launch.call in HTA_LAUNCH_STATS_CALLS)
    for key, first, calls, of in (("queues", False, QUEUE_LAUNCHES, kept),
                                  ("queues_launches_first", True, QUEUE_LAUNCHES, kept),
                                  ("queues_hta_calls", False, HTA_QUEUE_CALLS, kept),
                                  ("queues_without_row_0", False, QUEUE_LAUNCHES, _without_row_0(kept))):
        result[key] = {str(s.queue): [float(q.count), float(q.max), q.p25, q.p50, q.p75]
                       for s in queue_series(of, first, calls) for q in [summarize_queue(s, 2, 1)]}
    found = comm_comp_overlap(kept.gpu)
    result["overlap"] = "none: no communication kernels" if found is None else round(found, 2)
    return result


def _without_row_0(activity: Any) -> Any:
    """`activity` without the GPU work launched by its first event, when that is a launch call:
    HTA's index_correlation 0 means "the linked event is not in the trace", so the event at row 0
    loses its link (its queue series leaves that launch and its work out)."""
    calls, nodes, gpu = activity.api, activity.nodes, activity.gpu
    if not len(calls) or not len(gpu):
        return activity
    first = int(np.argmin(calls.column("start")))
    start = calls.column("start")[first]
    if len(nodes) and nodes.column("start").min() <= start or gpu.column("start").min() <= start:
        return activity
    keep = np.flatnonzero(gpu.column("correlation_id") != calls.column("correlation_id")[first])
    return replace(activity, gpu=gpu.take(keep), _launch={})


def _mtia_dma_without_stream(event: Any) -> bool:
    return (isinstance(event, dict) and event.get("cat") == "mtia_ccp_events"
            and str(event.get("name", "")).startswith("dma") and "stream" not in (event.get("args") or {}))


def _mtia_wait(event: Any) -> bool:
    return isinstance(event, dict) and event.get("cat") == "mtia_ccp_events" and event.get("name") == "event_wait"


def _as_hta_reads_mtia(events: list[Any]) -> list[Any]:
    """MTIA's device events as HTA 0.6.1 reads them: a DMA transfer without args.stream has stream
    -1 there (a CPU event), and an event_wait (a queue waiting for another) is a kernel of type
    computation (its name is not in HTA's list of non-compute names)."""
    return [dict(e, name="event_wait as a kernel") if _mtia_wait(e) else e
            for e in events if not _mtia_dma_without_stream(e)]


def _hta_shapes(kineto_file: Path) -> dict[str, Any]:
    """Counts of the shapes HTA reads differently (docs/hta.md): cpu_op slices whose args give a
    stream (HTA counts them as kernels), MTIA DMA transfers without a stream (HTA's stream -1 makes
    them CPU events); the document itself under private keys, for a trimmed copy."""
    import gzip

    opener = gzip.open if kineto_file.name.endswith(".gz") else open
    with opener(kineto_file, "rt") as handle:
        doc = json.load(handle)
    events = doc.pop("traceEvents", [])
    return {"cpu_ops_with_a_stream": sum(1 for e in events if isinstance(e, dict) and e.get("cat") == "cpu_op"
                                         and isinstance(e.get("args"), dict) and "stream" in e["args"]),
            "mtia_dma_without_stream": sum(1 for e in events if _mtia_dma_without_stream(e)),
            "mtia_waits": sum(1 for e in events if _mtia_wait(e)),
            "_doc": doc, "_events": events}


# ------------------------------------------------------------------------------------ comparing
def cell(theirs: Any, mine: Any) -> str:
    if isinstance(theirs, float) and theirs != theirs:  # NaN: HTA's overlap without communication
        return "-" if isinstance(mine, str) else f"differ: ours {mine}, HTA none"
    if isinstance(mine, str) and not mine.startswith("none"):
        return f"dfcompass fails: {mine}"
    if isinstance(theirs, str):
        return theirs if theirs.startswith("HTA fails") else f"HTA: {theirs}"
    if isinstance(mine, str):
        return "-" if not theirs or (isinstance(theirs, list) and not any(theirs)) else f"differ: ours {mine}"
    if isinstance(theirs, (int, float)) and isinstance(mine, (int, float)):
        return "match" if abs(theirs - mine) < 1e-9 else f"differ: {mine} against HTA's {theirs}"
    if isinstance(theirs, list):
        worst = max(abs(a - b) for a, b in zip(theirs, mine))
        return "match" if worst <= TOLERANCE_US else f"differ: by up to {worst:,.1f} µs"
    keys = set(theirs) | set(mine)
    if not keys:
        return "-"
    if any(isinstance(v, list) for v in list(theirs.values()) + list(mine.values())):  # per stream: rows of numbers
        if set(theirs) != set(mine):
            return f"differ: streams {sorted(mine)} against HTA's {sorted(theirs)}"
        off = [k for k in keys if any(abs(a - b) > 1e-9 for a, b in zip(theirs[k], mine[k]))]
        return "match" if not off else f"differ: streams {off}"
    worst = max(abs(theirs.get(k, 0.0) - mine.get(k, 0.0)) for k in keys)
    return "match" if worst <= TOLERANCE_US else f"differ: by up to {worst:,.1f} µs"


def _hta_without_cpu_op_streams(path: Path, hta_python: str, timeout_s: int) -> dict[str, Any] | str:
    """HTA's numbers for a copy of `path` whose cpu_op slices lose their args.stream: what HTA gives
    once it no longer takes them for kernels (checks that this alone makes the difference)."""
    shapes = _hta_shapes(path)
    events = [dict(e, args={k: v for k, v in e["args"].items() if k != "stream"})
              if isinstance(e, dict) and e.get("cat") == "cpu_op" and isinstance(e.get("args"), dict) else e
              for e in shapes["_events"]]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "copy.json").write_text(json.dumps({**shapes["_doc"], "traceEvents": events}))
        found = run_hta(tmp, hta_python, timeout_s)
    return found if isinstance(found, str) else next(iter(found.values()))


def folder_rows(folder: Path, theirs: dict[str, Any] | str, numbers: dict[str, Any], hta_python: str,
                timeout_s: int) -> list[tuple[str, ...]]:
    """One row per rank file of `folder`: the import, then temporal, types and launches cells."""
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))
    by_file = {} if isinstance(theirs, str) else {r["file"]: r for r in theirs.values()}
    rows: list[tuple[str, ...]] = []
    summed: dict[str, float] = {}  # our types over the folder, as HTA sums them
    for path in files:
        mine = ours(path)
        ref = by_file.get(path.name, theirs if isinstance(theirs, str) else "HTA: not loaded")
        numbers[f"{folder.name}/{path.name}"] = {"hta": ref, "dfcompass": mine}
        if mine["import"] != "ok":
            rows.append((f"{folder.name}/{path.name}"[:60], mine["import"], *["-"] * len(ANALYSES)))
            continue
        for label, ns in mine["types"].items():
            summed[label] = summed.get(label, 0.0) + ns
        cells = [cell(ref if isinstance(ref, str) else ref.get(k, "HTA: no result"), mine[k])
                 for k in ANALYSES]
        if cells[0].startswith("differ:") and not isinstance(ref, str) and cell(
                ref.get("temporal"), mine.get("temporal_syncs_on_a_queue")) == "match":
            cells[0] = "differs on purpose: device-wide syncs (HTA counts stream 4294967295)"
        as_hta = mine.get("as_hta_reads_mtia")
        for at, key in ((0, "temporal"), (1, "types")):
            if as_hta and cells[at].startswith("differ:") and not isinstance(ref, str) \
                    and cell(ref.get(key), as_hta[key]) == "match":
                cells[at] = (f"differs on purpose: MTIA's {mine['mtia_dma_without_stream']} DMA transfers without a "
                             f"stream and {mine['mtia_waits']} queue waits are device work and waits here, CPU events "
                             "and computation in HTA (docs/hta.md)")
        if mine["cpu_ops_with_a_stream"] and any(c.startswith("differ:") for c in cells[:2]):
            fixed = _hta_without_cpu_op_streams(path, hta_python, timeout_s)  # HTA counts them as kernels
            for at, key in ((0, "temporal"), (1, "types")):
                if cells[at].startswith("differ:") and isinstance(fixed, dict) \
                        and cell(fixed.get(key), mine[key]) == "match":
                    cells[at] = (f"HTA's bug: {mine['cpu_ops_with_a_stream']} cpu_ops with a stream arg counted as "
                                 "kernels (without that arg, HTA's figure equals ours)")
        queues_at = ANALYSES.index("queues")
        if cells[queues_at].startswith("differ:") and not isinstance(ref, str) and cell(
                ref.get("queues"), mine.get("queues_launches_first")) == "match":
            cells[queues_at] = ("differs on purpose: at equal times a start frees the queue before a launch fills "
                                "it; HTA's unstable sort put this file's launches first (docs/hta.md)")
        if cells[queues_at].startswith("differ:") and not isinstance(ref, str) and cell(
                ref.get("queues"), mine.get("queues_hta_calls")) == "match":
            cells[queues_at] = ("differs on purpose: equal with HTA's launch calls (its queue series leaves out "
                                "hipModuleLaunchKernel and others; docs/hta.md)")
        if cells[queues_at].startswith("differ:") and not isinstance(ref, str) and cell(
                ref.get("queues"), mine.get("queues_without_row_0")) == "match":
            cells[queues_at] = ("HTA's bug: the file's first event is a launch, and HTA's index_correlation 0 "
                                "('not in the trace') drops it (docs/hta.md)")
        launches_at = ANALYSES.index("launches")
        if cells[launches_at].startswith("differ:") and not isinstance(ref, str) \
                and ref.get("launches") == mine["launches_hta_calls"]:
            cells[launches_at] = (f"differs on purpose: {mine['launches'] - mine['launches_hta_calls']} launches "
                                  "HTA does not pair (HIP, the driver API; docs/hta.md)")
        notes = f" ({'; '.join(mine['notes'])})" if mine["notes"] else ""
        rows.append((f"{folder.name}/{path.name}"[:60], "ok" + notes, *cells))
    if len(files) > 1 and not isinstance(theirs, str):
        folder_types = next((r.get("types") for r in theirs.values() if isinstance(r.get("types"), dict)), None)
        if folder_types is not None:
            verdict = cell(folder_types, summed) + " (summed over the folder's ranks, as HTA sums them)"
            rows = [(*r[:3], verdict, *r[4:]) if r[1].startswith("ok") else r for r in rows]
    return rows


def main() -> None:
    parser = hta_arguments(__doc__, "one folder per Kineto trace (its rank files)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds HTA may take per folder")
    args = parser.parse_args()
    if args.hta_only:
        print(json.dumps(hta_numbers(args.trace_dirs[0])))
        return
    if not args.hta_python:
        raise SystemExit("bench/hta_crosscheck.py: --hta-python PATH is needed (a Python with traceinsight 0.6.1)")
    rows: list[tuple[str, ...]] = []
    numbers: dict[str, Any] = {}
    for trace_dir in args.trace_dirs:
        for row in folder_rows(Path(trace_dir), run_hta(trace_dir, args.hta_python, args.timeout), numbers,
                               args.hta_python, args.timeout):
            rows.append(row)
            print(" | ".join(row), flush=True)
    out = REPO_ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "hta_crosscheck.json").write_text(json.dumps(numbers, indent=1, sort_keys=True, default=str))
    tally: dict[str, int] = {}
    for row in rows:
        for value in row[2:]:
            key = value.split(":")[0]
            tally[key] = tally.get(key, 0) + 1
    print("cells: " + ", ".join(f"{n} {k}" for k, n in sorted(tally.items())))


if __name__ == "__main__":
    main()
