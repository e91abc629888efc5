"""Measure, once per recorded job, what a placement plan's lanes will cost on this machine.

A plan that runs a program on several CPU lanes pays two things the sequential recording never
shows: the *hand-over* (a lane waiting for another lane's output wakes up some time after it is
ready) and *contention* (two lanes computing at once each run slower than one alone: shared caches,
memory bandwidth, clocks). Both depend on the machine, and on how busy it is, so ``dfcompass record``
measures them on the machine that ran the program, right after it, and stores them beside the trace
(:data:`tracer.schema.CALIBRATION_FILE`). The busy variants run the same measurement beside a
process spinning on one core: the machine one background job away.

Run as ``python -m tracer.calibrate`` it prints the JSON; ``dfcompass record`` runs it in a child
process, so the numbers do not depend on what the launcher imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tracer import job, schema

SAMPLES = 120  # hand-overs per condition: its p90 varied 41-69 us over runs on this 2-core VM
WORK_REPEATS = 50  # kernel runs per lane and round (~30 ms)
ROUNDS = 9  # pairs of rounds per condition


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _quantile(values: list[Any], q: float) -> Any:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def handover_ns(samples: int = SAMPLES) -> list[int]:
    """How long a thread blocked on an Event takes to run again once another thread sets it, while
    the setter goes on computing (as a producer lane goes on to its next node): what a lane waits,
    beyond the producer's end, for an input another lane made. On a quiet machine the consumer wakes
    on an idle core; beside a busy core it waits for the scheduler to preempt someone."""
    waits: list[int] = []
    event = threading.Event()
    done = threading.Event()
    set_at = [0]
    chunk = bytes(1 << 15)

    def consumer() -> None:
        for _ in range(samples):
            event.wait()
            waits.append(time.perf_counter_ns() - set_at[0])
            event.clear()
            done.set()

    thread = threading.Thread(target=consumer, daemon=True)
    thread.start()
    for _ in range(samples):
        time.sleep(0.0002)  # the consumer is asleep in wait(), as a lane waiting for an input is
        set_at[0] = time.perf_counter_ns()
        event.set()
        give_up = time.perf_counter_ns() + 200_000_000
        while not done.is_set() and time.perf_counter_ns() < give_up:
            hashlib.sha256(chunk).digest()  # keeps this core busy, the GIL released while it hashes
        done.wait()
        done.clear()
    thread.join()
    return waits


def _dispatch() -> int:
    """Python work holding the GIL, like a framework's dispatch of one op (~20 us)."""
    return sum(i * i for i in range(400))


def _kernel() -> Callable[[], None]:
    """Two dataflow nodes, with the stdlib alone (the recorder loads in any Python): each a dispatch
    that holds the GIL, then work that releases it as an aten or BLAS kernel does (~0.3 ms): a
    hash over 128 kB (compute, streaming memory), a compression of 32 kB (branchy compute over a
    working set). The GIL matters beside a busy core: a lane preempted while it holds the GIL stalls
    the other lane's next dispatch."""
    import random
    import zlib

    stream = random.Random(0).randbytes(1 << 17)
    text = bytes(random.Random(1).choices(b"abcdefgh  ", k=1 << 15))

    def run() -> None:
        _dispatch()
        hashlib.sha256(stream).digest()
        _dispatch()
        zlib.compress(text, 1)
    return run


def _lane_seconds(kernel: Callable[[], None], lanes: int, repeats: int) -> float:
    """The wall time of `lanes` threads running the kernel `repeats` times each, meeting after every
    run (a fork-join, as a plan's lanes wait on each other's outputs). Not pinned, as graph-program
    lanes are not: beside a busy core the OS moves them, and the meetings make every lane wait for
    the one that was last to get a core."""
    meet = threading.Barrier(lanes)

    def lane() -> None:
        for _ in range(repeats):
            kernel()
            meet.wait()

    threads = [threading.Thread(target=lane) for _ in range(lanes)]
    start = time.perf_counter_ns()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter_ns() - start) / 1e9


def node_ratios(lanes: int, busy: Callable[[], Any] | None = None) -> tuple[float, list[float]]:
    """One node's time alone (one thread; its median), and the ratios of `lanes` lanes' time at
    once over one thread's in :data:`ROUNDS` interleaved pairs of rounds of ~30 ms, both beside the
    load `busy` starts when given. Small nodes, as a fine-grained plan has: they pay the stalls of
    a busy machine most often."""
    kernel = _kernel()
    for _ in range(3):
        kernel()  # warm caches
    load = busy() if busy is not None else None
    alone: list[float] = []
    ratios: list[float] = []
    try:
        if load is not None:
            time.sleep(0.02)
        for _ in range(ROUNDS):
            alone.append(_lane_seconds(kernel, 1, WORK_REPEATS))
            ratios.append(_lane_seconds(kernel, lanes, WORK_REPEATS) / alone[-1])
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return statistics.median(alone) / (2 * WORK_REPEATS), ratios


def _burner(seconds: float) -> subprocess.Popen[bytes]:
    spin = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end: pass"
    return subprocess.Popen([sys.executable, "-c", spin])


def measure() -> dict[str, Any]:
    """The calibration of this machine (the keys ``tracer.schema.CAL_*``)."""
    lanes = min(2, _cores())
    quiet = handover_ns()
    node, quiet_ratios = node_ratios(lanes)
    _, busy_ratios = node_ratios(lanes, busy=lambda: _burner(5.0))  # bounded even if this process dies
    burner = _burner(5.0)
    try:
        time.sleep(0.02)
        busy = handover_ns()
    finally:
        burner.kill()
        burner.wait()
    return {
        schema.CAL_CORES: _cores(), schema.CAL_LANES: lanes,
        schema.CAL_HANDOVER_P50_NS: _quantile(quiet, 0.5), schema.CAL_HANDOVER_P90_NS: _quantile(quiet, 0.9),
        schema.CAL_BUSY_HANDOVER_P90_NS: _quantile(busy, 0.9),
        schema.CAL_CONTENTION: round(max(1.0, statistics.median(quiet_ratios)), 3),
        # the p90, as the range's other slow ends: one round beside a busy core varies by 2x here
        schema.CAL_BUSY_CONTENTION: round(max(1.0, _quantile(busy_ratios, 0.9)), 3),
        schema.CAL_NODE_NS: int(round(node * 1e9)),
    }


def calibrate_into(folder: str | os.PathLike[str], timeout_s: float = 30.0) -> str | None:
    """Measure in a child process and write FOLDER/calibration.json (the job's folder); an error line
    when it could not, None when it did. A failed calibration never fails the recording."""
    env = dict(os.environ)
    env.pop(job.JOB_ENV, None)  # the calibration is not a process of the job
    try:
        done = subprocess.run([sys.executable, "-m", "tracer.calibrate"], env=env, capture_output=True,
                              text=True, timeout=timeout_s)
        if done.returncode != 0:
            return f"calibration failed: {(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}"
        values = json.loads(done.stdout)
        path = os.path.join(os.fspath(folder), schema.CALIBRATION_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"source": "measured by dfcompass record after the program", **values}, f, indent=1)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"calibration failed: {exc}"
    return None


if __name__ == "__main__":
    print(json.dumps(measure()))
