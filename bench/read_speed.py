"""Read speed: our reader against ``babeltrace2 --output-format=dummy`` on one 5M-event trace.

Target: our reader >= 10x babeltrace2's events/s.

Cases, alternated, best of k each, on a page-cache-warm trace:

* ``babeltrace2 dummy``: the CLI decoding every event into a sink that discards it
  (wall clock of the subprocess, its ~10 ms start included).
* ``read_trace``: :func:`tc_analyses.reader.fast.read_trace` in this process, then every numeric
  column touched (sums, a bincount of op sids) so nothing stays lazy or unread.
* ``read_trace (new process)``: the same in a fresh interpreter, imports included: the
  like-for-like comparison with a CLI run, reported as a second ratio.

Optional: babeltrace2's Python bindings (``bt2.TraceCollectionMessageIterator``, only counting
event messages, the least work a bt2 reader can do) against ``read_trace`` on a 100k-event trace.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from _common import OUT_DIR, REPO_ROOT, Sample, Timings, alternate, log, timed
from tc_analyses.reader.fast import DfcTrace, read_trace
from tracegen import ensure_trace

TARGET_RATIO = 10.0
BIG_EVENTS = 5_000_000
SMALL_EVENTS = 100_000
_COUNTER = re.compile(r"^\s*(\d+)\s+Event messages\s*$", re.M)


# ---------------------------------------------------------------------------- the readers
def touch(trace: DfcTrace) -> dict[str, int]:
    """Reduce every numeric column, so the timing covers data actually delivered to an analysis."""
    checksum = 0
    events = 0
    for table in trace.tables.values():
        events += len(table)
        for column in table.columns:
            values = table[column]
            if values.dtype.kind in "ui":
                checksum += int(np.add.reduce(values, dtype=np.uint64))
    ops = trace.table("node_begin")["op"]
    hot_ops = int(np.count_nonzero(np.bincount(ops))) if len(ops) else 0
    node_ids = int(trace.table("node_begin")["node_id"].sum(dtype=np.uint64))
    return {"events": events, "checksum": checksum & 0xFFFFFFFFFFFFFFFF, "distinct_ops": hot_ops,
            "node_id_sum": node_ids}


def read_and_touch(path: Path) -> dict[str, int]:
    return touch(read_trace(path))


def babeltrace2_dummy(path: Path) -> None:
    proc = subprocess.run(["babeltrace2", "--output-format=dummy", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"babeltrace2 rejected {path} (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")


def babeltrace2_event_count(path: Path) -> int:
    """Events babeltrace2 decodes from `path`, via the counter sink (also proves it accepts the trace)."""
    proc = subprocess.run(["babeltrace2", str(path), "-c", "sink.utils.counter", "-p", "step=+0"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"babeltrace2 rejected {path} (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    found = _COUNTER.findall(proc.stdout)
    if not found:
        raise RuntimeError(f"cannot parse the babeltrace2 counter output: {proc.stdout[:500]!r}")
    return int(found[-1])


_SUBPROCESS_READ = (
    "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[2]); "
    "from read_speed import read_and_touch; print(read_and_touch(Path(sys.argv[1]))['events'])"
)


def read_in_new_process(path: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", _SUBPROCESS_READ, str(path), str(Path(__file__).parent)],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"read_trace in a new process failed: {proc.stderr.strip()[-2000:]}")
    return int(proc.stdout.strip().splitlines()[-1])


def bt2_python_count(path: Path) -> int:
    import bt2

    event_type = bt2._EventMessageConst
    count = 0
    for msg in bt2.TraceCollectionMessageIterator(str(path)):
        if type(msg) is event_type:
            count += 1
    return count


# ---------------------------------------------------------------------------- helpers
def warm_page_cache(path: Path) -> int:
    """Read every file once so no timed run pays for the disk."""
    total = 0
    for file in path.iterdir():
        if file.is_file():
            total += len(file.read_bytes())
    return total


def _case(fn: Callable[[], Any], check: Callable[[Any], None]) -> Callable[[], Sample]:
    def run() -> Sample:
        seconds, value = timed(fn)
        check(value)  # outside the timing
        return Sample(seconds, {"value": value} if isinstance(value, dict) else {})

    return run


def _expect_events(expected: int) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        got = value["events"] if isinstance(value, dict) else value
        if got != expected:
            raise RuntimeError(f"read {got} events, expected {expected}")

    return check


def _no_check(value: Any) -> None:
    pass


def _speed(timings: Timings, events: int) -> dict[str, Any]:
    best = timings.best.seconds
    return {"best_s": best, "all_s": timings.all_seconds, "events_per_s": events / best}


# ---------------------------------------------------------------------------- benchmarks
def _prepare(path: Path, events: int) -> dict[str, int]:
    t0 = time.perf_counter()
    counts, generated = ensure_trace(path, events)
    log(f"  {'generated' if generated else 'reusing'} {path.name}: {events:,} events "
        f"({time.perf_counter() - t0:.1f} s)")
    return counts


def big_trace(rounds: int) -> dict[str, Any]:
    path = OUT_DIR / "trace-5M"
    counts = _prepare(path, BIG_EVENTS)
    size = warm_page_cache(path)
    bt_count = babeltrace2_event_count(path)
    if bt_count != BIG_EVENTS:
        raise RuntimeError(f"babeltrace2 decodes {bt_count} events from {path}, expected {BIG_EVENTS}")
    log(f"  babeltrace2 accepts it: {bt_count:,} events, {size / 1e6:.0f} MB")
    cases = {
        "babeltrace2 dummy": _case(lambda: babeltrace2_dummy(path), _no_check),
        "read_trace": _case(lambda: read_and_touch(path), _expect_events(BIG_EVENTS)),
        "read_trace (new process)": _case(lambda: read_in_new_process(path), _expect_events(BIG_EVENTS)),
    }
    timings = alternate(cases, rounds, log)
    speeds = {name: _speed(t, BIG_EVENTS) for name, t in timings.items()}
    ratio = speeds["read_trace"]["events_per_s"] / speeds["babeltrace2 dummy"]["events_per_s"]
    ratio_process = speeds["read_trace (new process)"]["events_per_s"] / speeds["babeltrace2 dummy"]["events_per_s"]
    return {
        "trace": str(path), "events": BIG_EVENTS, "bytes": size, "counts": counts,
        "babeltrace2_event_count": bt_count, "touch": timings["read_trace"].best.extra.get("value"),
        "cases": speeds, "ratio": ratio, "ratio_new_process": ratio_process,
        "target_ratio": TARGET_RATIO, "pass": ratio >= TARGET_RATIO,
    }


def small_trace_bt2_python(rounds: int) -> dict[str, Any]:
    """bt2 Python bindings against read_trace on a 100k-event trace (optional)."""
    try:
        import bt2  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"bt2 not importable: {exc}"}
    path = OUT_DIR / "trace-100k"
    _prepare(path, SMALL_EVENTS)
    warm_page_cache(path)
    cases = {
        "bt2 python": _case(lambda: bt2_python_count(path), _expect_events(SMALL_EVENTS)),
        "read_trace": _case(lambda: read_and_touch(path), _expect_events(SMALL_EVENTS)),
    }
    timings = alternate(cases, rounds)
    speeds = {name: _speed(t, SMALL_EVENTS) for name, t in timings.items()}
    return {
        "trace": str(path), "events": SMALL_EVENTS, "cases": speeds,
        "ratio": speeds["read_trace"]["events_per_s"] / speeds["bt2 python"]["events_per_s"],
    }


def run(rounds: int = 3) -> dict[str, Any]:
    if shutil.which("babeltrace2") is None:
        raise RuntimeError("babeltrace2 not found on PATH (run 'make setup')")
    log(f"read speed: {BIG_EVENTS:,}-event trace, {rounds} alternating rounds")
    result = big_trace(rounds)
    log(f"read speed: bt2 Python bindings on a {SMALL_EVENTS:,}-event trace")
    result["bt2_python_100k"] = small_trace_bt2_python(rounds)
    return result
