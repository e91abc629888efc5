"""CTF 1.8 read speed: our pure-Python reader (``reader.ctf``) against babeltrace2 on a real LTTng trace.

The trace is ../shared/traces/lttng/many-threads (LTTng kernel, 240,644 events in 8 streams, 8 MB),
page-cache warm. Cases, alternated, best of k each:

* ``iter_ctf``: every record of :func:`tc_analyses.reader.ctf.iter_ctf`, fields decoded.
* ``bt2 in process``: babeltrace2's Python bindings in this process turning every message into
  the same records (``bt2_source._read_in_process``, fields decoded): the reader ctf stands in for.
* ``babeltrace2 dummy``: the CLI decoding every event into a sink that discards it (its start included).

The headline is the events/s ratios of iter_ctf to each. Skipped, and said so, without
``../shared`` or the bt2 bindings.

Then CTF 2 against CTF 1.8 (issue 38: within 1.2x): a generated 200,000-event dfcompass trace
written twice, with TSDL and with JSON metadata (the same streams), read alternately by the numpy
reader (what every command reads dfcompass traces with) and by ``iter_ctf``; the headline is the
time ratio CTF 2 / CTF 1.8 of each reader.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

from _common import REPO_ROOT, Sample, Timings, alternate, babeltrace2_dummy, log, timed

TRACE = REPO_ROOT.parent / "shared" / "traces" / "lttng" / "many-threads"
EVENTS = 240_644  # ../shared/traces/README.md


def count(records: Iterable[Any]) -> int:
    """Consume every record (the readers are lazy), counting them."""
    n = 0
    for _ in records:
        n += 1
    return n


def reader_case(read: Callable[[], Iterable[Any]]) -> Callable[[], Sample]:
    def case() -> Sample:
        seconds, records = timed(lambda: count(read()))
        if records != EVENTS:  # checked outside the timing; no trace here has discarded events
            raise RuntimeError(f"read {records} records from {TRACE}, expected {EVENTS}")
        return Sample(seconds)

    return case


def _speed(timings: Timings) -> dict[str, Any]:
    best = timings.best.seconds
    return {"best_s": best, "all_s": timings.all_seconds, "events_per_s": EVENTS / best}


def run(rounds: int = 3) -> dict[str, Any]:
    return {**_versions(rounds), **_lttng(rounds)}


def _versions(rounds: int) -> dict[str, Any]:
    """CTF 2 against CTF 1.8: the same generated trace under either metadata, read by both readers."""
    from tc_analyses.reader.ctf import iter_ctf
    from tc_analyses.reader.fast import read_trace
    from tracegen import generate

    from _common import OUT_DIR

    events = 200_000
    paths = {version: OUT_DIR / f"trace-200k-ctf{version}" for version in ("1.8", "2")}
    for version, path in paths.items():
        generate(path, events, ctf_version=version)
    log(f"CTF 2 against CTF 1.8: {events:,} events, {rounds} alternating rounds")

    def fast(path: Path) -> Callable[[], Sample]:
        return lambda: Sample(timed(lambda: sum(len(t) for t in read_trace(path).tables.values()))[0])

    def general(path: Path) -> Callable[[], Sample]:
        return lambda: Sample(timed(lambda: count(iter_ctf(str(path))))[0])

    cases = {f"{name} CTF {v}": make(p) for name, make in (("fast", fast), ("iter_ctf", general))
             for v, p in paths.items()}
    best = {name: t.best.seconds for name, t in alternate(cases, rounds, log).items()}
    return {"versions": {"events": events, "best_s": best,
                         "ratio_fast_ctf2_to_18": best["fast CTF 2"] / best["fast CTF 1.8"],
                         "ratio_iter_ctf_ctf2_to_18": best["iter_ctf CTF 2"] / best["iter_ctf CTF 1.8"]}}


def _lttng(rounds: int) -> dict[str, Any]:
    if not TRACE.is_dir():
        return {"skipped": f"{TRACE} is absent (the shared traces are not part of the project)"}
    try:
        import bt2  # noqa: F401
    except ImportError as exc:
        return {"skipped": f"bt2 not importable ({exc}): install python3-bt2 and run 'make setup'"}
    if shutil.which("babeltrace2") is None:
        return {"skipped": "babeltrace2 not found on PATH (run 'make setup')"}
    from tc_analyses.reader.bt2_source import _read_in_process
    from tc_analyses.reader.ctf import iter_ctf

    path = str(TRACE)
    for file in Path(path).rglob("*"):  # warm the page cache: no timed run pays for the disk
        if file.is_file():
            file.read_bytes()
    log(f"ctf speed: {TRACE.name}, {EVENTS:,} events, {rounds} alternating rounds")
    cases = {
        "iter_ctf": reader_case(lambda: iter_ctf(path, with_fields=True)),
        "bt2 in process": reader_case(lambda: _read_in_process(path, True)),
        "babeltrace2 dummy": babeltrace2_dummy(TRACE),
    }
    speeds = {name: _speed(t) for name, t in alternate(cases, rounds, log).items()}
    ours = speeds["iter_ctf"]["events_per_s"]
    return {
        "trace": path, "events": EVENTS, "rounds": rounds, "cases": speeds,
        "ratio_bt2_in_process": ours / speeds["bt2 in process"]["events_per_s"],
        "ratio_babeltrace2_dummy": ours / speeds["babeltrace2 dummy"]["events_per_s"],
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(run(int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=2))
