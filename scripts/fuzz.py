"""Fuzz dfcompass's inputs with N seeded cases (``make fuzz``; default 10,000), counted by outcome.

Seed s is a case of kind ``KINDS[s % 8]`` (tests/fuzz/cases.py: damaged dfcompass traces, damaged
LTTng traces, damaged Kineto JSON, damaged XML analyses, damaged graph files, damaged plans, command
lines, damaged CTF 2 traces). The
LTTng kind needs ../shared; without it those seeds are skipped and counted as such. Each worker's
peak RSS (every case it ran is under it) is reported; over ``RSS_LIMIT_MB`` is a failure.

Cases run in worker processes (one per CPU) that report each outcome on a pipe. A worker that dies
is a "signal death" (or "exit") of the case it was running; a case that runs past ``LIMIT_S``
(every input is under 0.2 MB) is a "hang", and its worker is killed. Either
way a new worker goes on from the next seed.
Prints counts by kind and outcome, the first seed of each, the slowest case, and exits 1 unless
every case ended "ok" or in a "one-line error" naming its input.
Usage: ``.venv/bin/python scripts/fuzz.py [N] [--workers K]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LIMIT_S = 10.0
RSS_LIMIT_MB = 1024
GOOD = ("ok", "one-line error", "skipped")


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 1e6


def worker(seeds: list[int], workdir: Path) -> None:
    """Run the cases of `seeds` in order; print 'seed kind outcome seconds mb detail' per case."""
    from tests.fuzz.cases import KINDS, LTTNG, classify, prepare

    for seed in seeds:
        kind = KINDS[seed % len(KINDS)]
        case_dir = workdir / f"case{seed}"
        case_dir.mkdir(parents=True, exist_ok=True)
        print(json.dumps({"seed": seed, "started": True}), flush=True)
        if kind == "lttng" and not LTTNG.exists():
            result = {"seed": seed, "kind": kind, "outcome": "skipped", "detail": "no ../shared"}
        else:
            path, run = prepare(kind, seed, case_dir)
            mb = _size_mb(path)
            started = time.perf_counter()
            outcome, detail = classify((path,), run)
            result = {"seed": seed, "kind": kind, "outcome": outcome, "detail": detail,
                      "seconds": time.perf_counter() - started, "mb": mb}
        shutil.rmtree(case_dir, ignore_errors=True)
        result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
        print(json.dumps(result), flush=True)


class _Worker:
    def __init__(self, seeds: list[int], workdir: Path) -> None:
        self.seeds = seeds
        self.current: int | None = None
        self.started_at = 0.0
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", ",".join(map(str, seeds)), str(workdir)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
        self._buffer = b""

    def lines(self) -> list[dict[str, object]] | None:
        """The whole lines read now (maybe none); None once the worker has closed its end."""
        assert self.proc.stdout is not None
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            return None
        self._buffer += chunk
        *whole, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in whole if line.strip()]


def main(count: int, workers: int) -> int:
    from tests.fuzz.cases import KINDS

    outcomes: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], tuple[int, str]] = {}
    slowest = (0.0, -1, 0.0)
    peak_mb = 0.0
    todo = list(range(count))
    with tempfile.TemporaryDirectory(prefix="dfc-fuzz-") as tmp:
        pending = [todo[i::workers] for i in range(workers)]
        running: list[_Worker] = [_Worker(p, Path(tmp) / f"w{i}") for i, p in enumerate(pending) if p]
        done = 0
        next_report = 500

        def lost_case(w: _Worker, outcome: str) -> None:
            """The worker died or hung on its case: count it and go on from the next seed."""
            nonlocal done
            assert w.current is not None
            key = (KINDS[w.current % len(KINDS)], outcome)
            outcomes[key] += 1
            first.setdefault(key, (w.current, ""))
            done += 1
            running.remove(w)
            rest = w.seeds[w.seeds.index(w.current) + 1:]
            if rest:
                running.append(_Worker(rest, Path(tmp) / f"w{w.current}"))

        while running:
            streams = {w.proc.stdout.fileno(): w for w in running if w.proc.stdout is not None}
            ready, _, _ = select.select(list(streams), [], [], 0.5)
            now = time.monotonic()
            for fd in ready:
                w = streams[fd]
                lines = w.lines()
                if lines is None:  # the worker ended
                    w.proc.wait()
                    code = w.proc.returncode
                    if w.current is None:
                        running.remove(w)
                    else:
                        lost_case(w, f"signal death: {signal.Signals(-code).name}" if code < 0 else f"exit {code}")
                    continue
                for line in lines:
                    if line.get("started"):
                        w.current, w.started_at = int(line["seed"]), now  # type: ignore[call-overload]
                        continue
                    key = (str(line["kind"]), str(line["outcome"]))
                    outcomes[key] += 1
                    first.setdefault(key, (int(line["seed"]), str(line.get("detail", ""))))  # type: ignore[call-overload]
                    peak_mb = max(peak_mb, float(line.get("peak_mb", 0.0)))  # type: ignore[arg-type]
                    seconds = float(line.get("seconds", 0.0))  # type: ignore[arg-type]
                    if seconds > slowest[0]:
                        slowest = (seconds, int(line["seed"]), float(line.get("mb", 0.0)))  # type: ignore[call-overload,arg-type]
                    w.current = None
                    done += 1
            for w in list(running):
                if w.current is not None and now - w.started_at > LIMIT_S:
                    w.proc.kill()
                    w.proc.wait()
                    lost_case(w, "hang")
            if done >= next_report:
                print(f"fuzz: {done}/{count} cases", file=sys.stderr, flush=True)
                next_report += 500
    print(f"{'kind':8s} {'outcome':44s} {'cases':>6s}  first seed")
    for (kind, outcome), n in sorted(outcomes.items()):
        seed, detail = first[(kind, outcome)]
        print(f"{kind:8s} {outcome:44s} {n:6d}  {seed}" + (f"  {detail}" if outcome not in GOOD and detail else ""))
    failures = sum(n for (_, outcome), n in outcomes.items() if outcome not in GOOD) + (peak_mb > RSS_LIMIT_MB)
    print(f"peak RSS of a worker (each case ran under it): {peak_mb:.0f} MB (limit {RSS_LIMIT_MB} MB)")
    print(f"slowest case: seed {slowest[1]}, {slowest[0]:.2f} s for {slowest[2] * 1e3:.0f} kB"
          f" ({slowest[0] / max(slowest[2], 1e-6):.1f} s per MB)")
    print(f"{count} cases, {failures} failures (signal deaths, hangs, internal errors, messages not naming the file)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker([int(s) for s in sys.argv[2].split(",") if s], Path(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    sys.exit(main(args.count, args.workers))
