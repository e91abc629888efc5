"""Issue 34's table: analysis at reading speed, each row a ratio measured side by side in one run.

Every command runs in a fresh process (wall time, CPU time and peak RSS from ``wait4``), the
cases of a row interleaved for ``rounds`` rounds (order rotated), and the **median** of each case
kept. The load average is printed before and after: a busy machine shows there, not as a
silent slowdown of one side.

Rows and targets (issue 34):

* ``analyze --no-sections`` on the 1M-event synthetic trace against ``babeltrace2
  --output-format=dummy`` on it: ≥ 0.5× (babeltrace2's time over ours); peak RSS ≤ 2× the trace;
* ``analyze`` with every section, same trace and peer: ≥ 0.25×;
* ``states --csv`` against ``states --at 0`` (the engine alone): the CSV adds ≤ 50 %; and
  ``states --parquet`` the same way (no target: for comparison);
* ``info /nonexistent`` against ``--help``: ≤ 1.2× (each the best of 5 runs per round);
* ``recommend-placement`` of a 10k-node graph file: ≤ 2 s of CPU (HEFT alone, in process, beside it);
* with ``--big``: ``analyze --no-sections`` on 10M events against babeltrace2, ≤ 20 s, RSS ≤ 2×;
* ``recommend-placement`` of a ~27k-op LSTM-cell trace (``pace_lstm.py``, recorded once) against
  recording that program (``dfcompass record``, each round): ≤ 1×; skipped without torch;
* ``analyze`` with every section on a GPU trace (the shared nccl Kineto trace x25, ~1M events,
  imported once) against babeltrace2 on it (issue 34's "imported GPU trace" row; no target of its
  own: the all-sections target applies). Skipped, and said so, without ``../shared``.

The Kineto rows against HTA are the ``kineto`` and ``hta`` benchmarks (they need HTA's venv).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _common import OUT_DIR, REPO_ROOT, log
from tracegen import ensure_trace

# wall seconds, exit code, peak RSS (KiB) and CPU seconds (user + system) of one command
_SPAWNER = r"""
import os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - start, os.waitstatus_to_exitcode(status), usage.ru_maxrss, usage.ru_utime + usage.ru_stime)
"""

TARGETS = {"no_sections": 0.5, "all_sections": 0.25, "rss_per_trace": 2.0, "csv_extra": 0.5,
           "missing_path": 1.2, "placement_cpu_s": 2.0, "big_s": 20.0, "lstm_placement": 1.0}
LSTM_PROGRAM = Path(__file__).with_name("pace_lstm.py")


def _measure(argv: list[str], code: int = 0) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _SPAWNER, *argv], cwd=REPO_ROOT, capture_output=True, text=True)
    wall, status, rss, cpu = done.stdout.split()
    if int(status) != code:
        raise RuntimeError(f"{' '.join(argv[:3])} ... exited {status}, not {code}: {done.stderr[-300:]}")
    return {"wall_s": float(wall), "rss_kib": float(rss), "cpu_s": float(cpu)}


def _best_of(times: int, argv: list[str], code: int = 0) -> dict[str, float]:
    """The fastest of `times` runs back to back: a start-up of 0.15 s is mostly the machine's
    noise (one-sided: a busy moment only slows it), so each round keeps its best."""
    return min((_measure(argv, code) for _ in range(times)), key=lambda m: m["wall_s"])


def _medians(cases: dict[str, Callable[[], dict[str, float]]], rounds: int) -> dict[str, dict[str, float]]:
    """Each case's median of every measure over `rounds` interleaved rounds (order rotated)."""
    names = list(cases)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(cases[name]())
        log(f"  round {r + 1}/{rounds} done")
    return {name: {key: statistics.median(s[key] for s in runs) for key in runs[0]} for name, runs in samples.items()}


def _trace_bytes(trace: Path) -> int:
    return sum(f.stat().st_size for f in trace.iterdir() if f.is_file())


def _graph_file(path: Path, tasks: int) -> Path:
    from tc_analyses.analyses.placement import generate

    if not path.exists():
        problem = generate.random_layered(tasks, 2, 0)
        names = [d.name for d in problem.devices]
        nodes = [{"id": t.id, "name": t.name, "op": t.op,
                  "costs": {"cpu": problem.costs[(t.id, names[0])].ns, "cuda:0": problem.costs[(t.id, names[1])].ns}}
                 for t in problem.tasks]
        edges = [{"source": u, "target": v, "bytes": b} for (u, v), b in problem.edges.items()]
        path.write_text(json.dumps({"directed": True, "multigraph": False, "nodes": nodes, "edges": edges}))
    return path


def _heft_cpu_s(graph: Path) -> float:
    from tc_analyses.analyses.placement.graph_file import problem_from_graph_file
    from tc_analyses.analyses.placement.heft import heft
    from tc_analyses.perf.devices import parse_devices

    problem = problem_from_graph_file(graph, parse_devices("cpu,cuda:0=H100"))
    start = time.process_time()
    heft(problem)
    return time.process_time() - start


def _gpu_trace(dfcompass: str) -> Path | None:
    """The ~1M-event Kineto GPU trace imported once (kept beside the other bench inputs)."""
    from kineto_scale import SOURCE, scaled_file

    trace = OUT_DIR / "kineto-x25" / "trace"
    if (trace / "metadata").is_file():
        return trace
    source = OUT_DIR / "kineto-x25" / "scaled.json.gz"
    if not source.is_file():
        if not SOURCE.is_file():
            log(f"analysis pace: no GPU row ({SOURCE} is missing)")
            return None
        source.parent.mkdir(parents=True, exist_ok=True)
        scaled_file(25, source)
    subprocess.run([dfcompass, "--no-progress", "import-kineto", str(source), "-o", str(trace)], check=True,
                   capture_output=True)
    return trace


def _lstm_trace(dfcompass: str) -> Path | None:
    """The ~27k-op LSTM-cell trace (pace_lstm.py under ``dfcompass record``), recorded once."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        log("analysis pace: no LSTM placement row (torch is not installed)")
        return None
    trace = OUT_DIR / "lstm-27k"
    if not any(trace.glob("*/metadata")):
        subprocess.run([dfcompass, "--no-progress", "record", "-o", str(trace), "--overwrite", "--", sys.executable,
                        str(LSTM_PROGRAM)], check=True, capture_output=True)
    return trace


def run(rounds: int = 3, big: bool = False) -> dict[str, Any]:
    dfcompass = str(Path(sys.executable).parent / "dfcompass")
    trace = OUT_DIR / "trace-1m"
    ensure_trace(trace, 1_000_000)
    work = Path(tempfile.mkdtemp(prefix="dfcompass-pace-"))
    graph = _graph_file(OUT_DIR / "graph-10k.json", 10_000)
    subprocess.run([dfcompass, "build-analyses", str(trace), "-o", str(work / "analyses")], check=True,
                   capture_output=True)
    xml = str(work / "analyses" / "xml" / "dataflow.xml")  # the dataflow state provider: 1.3 M intervals
    load_before = os.getloadavg()
    log(f"analysis pace (issue 34): 1M-event trace, {rounds} interleaved rounds, medians; load {load_before[0]:.2f}")
    bt2 = ["babeltrace2", "--output-format=dummy", str(trace)]
    analyze = [dfcompass, "--no-progress", "analyze", str(trace)]
    cases: dict[str, Callable[[], dict[str, float]]] = {
        "babeltrace2 dummy": lambda: _measure(bt2),
        "analyze --no-sections": lambda: _measure(analyze + ["--no-sections"]),
        "analyze (all sections)": lambda: _measure(analyze),
        "states --at 0": lambda: _measure([dfcompass, "--no-progress", "states", str(trace), "--xml", xml,
                                           "--at", "0"]),
        "states --csv": lambda: _measure([dfcompass, "--no-progress", "states", str(trace), "--xml", xml,
                                          "--csv", str(work / "states.csv")]),
        "states --parquet": lambda: _measure([dfcompass, "--no-progress", "states", str(trace), "--xml", xml,
                                              "--parquet", str(work / "states.parquet")]),
        "--help": lambda: _best_of(5, [dfcompass, "--help"]),
        "info /nonexistent": lambda: _best_of(5, [dfcompass, "info", "/nonexistent"], 1),
        "recommend-placement 10k": lambda: _measure([dfcompass, "--no-progress", "recommend-placement", str(graph),
                                                     "--devices", "cpu,cuda:0=H100", "-o",
                                                     str(work / f"plan-{time.monotonic_ns()}")]),
    }
    gpu_trace = _gpu_trace(dfcompass)
    if gpu_trace is not None:
        cases["babeltrace2 dummy GPU"] = lambda: _measure(["babeltrace2", "--output-format=dummy", str(gpu_trace)])
        cases["analyze GPU (all sections)"] = lambda: _measure([dfcompass, "--no-progress", "analyze", str(gpu_trace)])
    lstm = _lstm_trace(dfcompass)
    if lstm is not None:  # the recorded run and the plan of its trace, side by side
        cases["record LSTM"] = lambda: _measure([dfcompass, "--no-progress", "record", "-o",
                                                 str(work / f"lstm-{time.monotonic_ns()}"), "--", sys.executable,
                                                 str(LSTM_PROGRAM)])
        cases["recommend-placement LSTM"] = lambda: _measure([dfcompass, "--no-progress", "recommend-placement",
                                                              str(lstm), "--devices", "cpu,cuda:0=H100", "-o",
                                                              str(work / f"lstm-plan-{time.monotonic_ns()}")])
    got = _medians(cases, rounds)
    if big:
        trace10 = OUT_DIR / "trace-10m"
        ensure_trace(trace10, 10_000_000)
        got.update({f"{name} 10M": value for name, value in _medians({
            "babeltrace2 dummy": lambda: _measure(["babeltrace2", "--output-format=dummy", str(trace10)]),
            "analyze --no-sections": lambda: _measure([dfcompass, "--no-progress", "analyze", str(trace10),
                                                       "--no-sections"])}, 1).items()})
    heft_cpu = min(_heft_cpu_s(graph) for _ in range(rounds))
    size = _trace_bytes(trace)
    bt2_s = got["babeltrace2 dummy"]["wall_s"]
    result: dict[str, Any] = {
        "cases": got, "trace_bytes": size, "heft_cpu_s": heft_cpu, "rounds": rounds, "targets": TARGETS,
        "load_before": load_before, "load_after": os.getloadavg(),
        "no_sections": bt2_s / got["analyze --no-sections"]["wall_s"],
        "all_sections": bt2_s / got["analyze (all sections)"]["wall_s"],
        "rss_per_trace": got["analyze --no-sections"]["rss_kib"] * 1024 / size,
        "rss_per_trace_all": got["analyze (all sections)"]["rss_kib"] * 1024 / size,
        "csv_extra": got["states --csv"]["wall_s"] / got["states --at 0"]["wall_s"] - 1,
        "parquet_extra": got["states --parquet"]["wall_s"] / got["states --at 0"]["wall_s"] - 1,
        "missing_path": got["info /nonexistent"]["wall_s"] / got["--help"]["wall_s"],
        "placement_cpu_s": got["recommend-placement 10k"]["cpu_s"],
    }
    if lstm is not None:
        result["lstm_placement"] = got["recommend-placement LSTM"]["wall_s"] / got["record LSTM"]["wall_s"]
    if gpu_trace is not None:
        result["gpu_all_sections"] = got["babeltrace2 dummy GPU"]["wall_s"] / got["analyze GPU (all sections)"]["wall_s"]
    if big:
        result["big_s"] = got["analyze --no-sections 10M"]["wall_s"]
        result["big_ratio"] = got["babeltrace2 dummy 10M"]["wall_s"] / result["big_s"]
        result["big_rss_per_trace"] = got["analyze --no-sections 10M"]["rss_kib"] * 1024 / _trace_bytes(trace10)
    higher = ("no_sections", "all_sections")
    result["pass"] = {key: (result[key] >= target if key in higher else result[key] <= target)
                      for key, target in TARGETS.items() if key in result}
    return result
