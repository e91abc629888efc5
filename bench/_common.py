"""Shared helpers for the benchmarks: alternating best-of-k timing, versions, the report table.

The bench machine is small and noisy, so nothing here trusts one timing: every case of a
benchmark is run in the same process, rounds alternate the cases (rotating their order so no
case always runs first), and the best (minimum) of each case is kept. Minimums estimate the
undisturbed cost; ratios between cases measured side by side are the numbers worth reading.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

OUT_DIR = Path(__file__).resolve().parent / "out"
REPO_ROOT = Path(__file__).resolve().parent.parent

# One case run: returns the wall-clock seconds it measured plus anything worth keeping.
Case = Callable[[], "Sample"]


@dataclass
class Sample:
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Timings:
    """All samples of one case; `best` is the one reported."""

    samples: list[Sample] = field(default_factory=list)

    @property
    def best(self) -> Sample:
        return min(self.samples, key=lambda s: s.seconds)

    @property
    def all_seconds(self) -> list[float]:
        return [s.seconds for s in self.samples]


def alternate(cases: dict[str, Case], rounds: int, log: Callable[[str], None] | None = None) -> dict[str, Timings]:
    """Run every case `rounds` times, interleaved, rotating the order each round."""
    names = list(cases)
    results = {name: Timings() for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            gc.collect()  # start each case from the same heap state, not the previous case's garbage
            results[name].samples.append(cases[name]())
        if log is not None:
            log(f"  round {r + 1}/{rounds} done")
    return results


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock seconds of one call, and its return value."""
    t0 = time.perf_counter_ns()
    value = fn()
    return (time.perf_counter_ns() - t0) / 1e9, value


# Runs the command and reports its wall time, exit code and peak RSS. A child forked straight from
# the bench process would report at least the bench's own RSS: Linux carries the forked memory's
# high-water mark across exec into ru_maxrss. This small process forks the command instead.
_SPAWNER = r"""
import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - start, os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def run_child(argv: list[str], cwd: Path = REPO_ROOT, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Run `argv` to its end in a fresh process (with `env` added to the environment): (wall
    seconds, its own peak RSS in KiB). A failure raises with the end of the child's stderr."""
    done = subprocess.run([sys.executable, "-c", _SPAWNER, *argv], cwd=cwd, capture_output=True,
                          env={**os.environ, **env} if env else None)
    try:
        seconds, code, rss = done.stdout.split()
    except ValueError:
        raise RuntimeError(f"{' '.join(argv[:2])} ... could not run: {done.stderr.decode(errors='replace')[-400:]}")
    if int(code) != 0:
        raise RuntimeError(f"{' '.join(argv[:2])} ... failed: {done.stderr.decode(errors='replace')[-400:]}")
    return float(seconds), int(rss)


def babeltrace2_dummy(trace: Path) -> Callable[[], "Sample"]:
    """A benchmark case: ``babeltrace2 --output-format=dummy TRACE``, failing loudly if it fails."""
    def case() -> Sample:
        seconds, done = timed(lambda: subprocess.run(["babeltrace2", "--output-format=dummy", str(trace)],
                                                     capture_output=True))
        if done.returncode != 0:
            raise RuntimeError(f"babeltrace2 failed: {done.stderr.decode()[:200]}")
        return Sample(seconds)

    return case


def babeltrace2_version() -> str:
    try:
        out = subprocess.run(["babeltrace2", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"unavailable ({exc})"
    return out.splitlines()[0].strip() if out else "unknown"


def versions() -> dict[str, str]:
    import numpy

    info = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "numpy": numpy.__version__,
        "babeltrace2": babeltrace2_version(),
        "platform": platform.platform(),
        "cpus": str(_cpu_count()),
    }
    try:
        import bt2

        info["bt2_python"] = str(bt2.__version__)
    except ImportError:
        info["bt2_python"] = "unavailable"
    return info


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def log(message: str) -> None:
    """Progress on stderr, so stdout holds only the report."""
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- report table
Row = tuple[str, str, str]  # (what, value, note)


def verdict(passed: bool) -> str:
    return "PASS" if passed else "MISSED"


def print_report(sections: list[tuple[str, list[Row]]]) -> None:
    """Print sections of (what, value, note) rows: rich on a terminal, aligned plain text otherwise."""
    if sys.stdout.isatty():
        try:
            _print_rich(sections)
            return
        except ImportError:
            pass
    _print_plain(sections)


def _print_plain(sections: list[tuple[str, list[Row]]]) -> None:
    for title, section in sections:
        w0 = max((len(r[0]) for r in section), default=0)
        w1 = max((len(r[1]) for r in section), default=0)
        print()
        print(title)
        print("-" * len(title))
        for what, value, note in section:
            print(f"  {what:<{w0}}  {value:>{w1}}  {note}".rstrip())
    print()


def _print_rich(sections: list[tuple[str, list[Row]]]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def styled(cell: str) -> Text:
        style = "bold green" if cell.startswith("PASS") else "bold red" if cell.startswith("MISSED") else ""
        return Text(cell, style=style)

    console = Console()
    for title, section in sections:
        table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left", show_header=False)
        table.add_column("what", no_wrap=True)
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("note")
        for what, value, note in section:
            table.add_row(what, styled(value), styled(note))
        console.print(table)


def hta_arguments(doc: str | None, traces_help: str) -> argparse.ArgumentParser:
    """The command line of the HTA cross-checks: trace folders, ``--hta-python``, ``--hta-only``
    (the scripts run their HTA half in HTA's own interpreter, which has none of dfcompass's packages)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace_dirs", nargs="+", help=traces_help)
    parser.add_argument("--hta-python", help="a Python interpreter with hta (traceinsight) installed")
    parser.add_argument("--hta-only", action="store_true", help="print HTA's numbers as JSON and stop")
    return parser
