"""The shapes real training programs take, recorded with `dfcompass record` and analysed on the
folder it wrote, with the main process chosen by itself (tests/torch_programs/)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.job import MAIN, WORKER, job_traces, roles, single_trace
from tests.helpers import subprocess_env

pytestmark = [pytest.mark.slow, pytest.mark.torch]

PROGRAMS = Path(__file__).resolve().parents[1] / "torch_programs"


def _record(dfcompass_exe: list[str], job: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*dfcompass_exe, "record", "-o", str(job), "--", sys.executable, *args],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _run(dfcompass_exe: list[str], *args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*dfcompass_exe, *map(str, args)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=300)


def _ops(path: Path) -> Counter[str]:
    return Counter(read_trace(path).table("node_begin").text("op").tolist())


def test_dataloader_workers_job_takes_every_command(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    job = tmp_path / "job"
    _record(dfcompass_exe, job, str(PROGRAMS / "loader_workers.py"))
    processes = job_traces(job)
    found = Counter(roles(processes).values())
    assert found[MAIN] == 1 and found[WORKER] >= 2, found
    main = single_trace(job)
    assert _ops(main)["aten::linear"] == 8  # 4 batches x 2 linears: the main process trains
    assert not any(_ops(p.path)["aten::linear"] for p in processes if roles(processes)[p.path] == WORKER)
    for command in (("parallelism",), ("recommend-placement", "--devices", "cpu,cuda:0", "-o", tmp_path / "plan"),
                    ("roofline",), ("build-analyses", "-o", tmp_path / "one", "--process", "main")):
        done = _run(dfcompass_exe, command[0], job, *command[1:])
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "reading the main process" in done.stderr and "DataLoader workers" in done.stderr, done.stderr
        if command[0] == "parallelism":
            assert "data loading: the main process waited" in done.stdout and "in 5 DataLoader __next__ calls" in done.stdout  # 4 batches, then the epoch's end
    built = _run(dfcompass_exe, "build-analyses", job, "-o", tmp_path / "tc")  # the whole job, as one experiment
    assert built.returncode == 0 and "reading" not in built.stderr, built.stderr
    readme = (tmp_path / "tc" / "README.md").read_text()
    assert "Open As Experiment" in readme and readme.count("DataLoader worker (pid") == 2
    assert "Open As Experiment" not in (tmp_path / "one" / "README.md").read_text()
    job_run = _run(dfcompass_exe, "analyze", job, "--in-process", "--no-sections", "--format", "json")
    assert job_run.returncode == 0, job_run.stderr[-2000:]  # the headless engine over every process of the folder
    assert json.loads(job_run.stdout)["traces"] == 3
    assert _run(dfcompass_exe, "info", job).returncode == 0
    ranks = _run(dfcompass_exe, "ranks", job)
    assert ranks.returncode == 1 and "no rank among its" in ranks.stderr and "dfcompass analyze" in ranks.stderr
    picked = _run(dfcompass_exe, "parallelism", job, "--process", str(processes[-1].pid), "--format", "json")
    assert "as --process said" in picked.stderr


def test_spawned_children_job_reads_the_main_process(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    job = tmp_path / "job"
    _record(dfcompass_exe, job, str(PROGRAMS / "spawn_children.py"))
    main = single_trace(job)
    assert len(job_traces(job)) >= 3
    assert _ops(main)["aten::linear"] == 1  # the evaluation after the children: the trainers are children
    done = _run(dfcompass_exe, "parallelism", job)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "child processes" in done.stderr  # the two trainers (and spawn's resource tracker)


def test_own_profiler_block_steps_the_recorder_aside(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    job = tmp_path / "job"
    user = tmp_path / "user.json"
    done = _record(dfcompass_exe, job, str(PROGRAMS / "own_profiler.py"), str(user))
    assert done.stderr.count("started its own torch profiler") == 1
    user_events = json.loads(user.read_text())["traceEvents"]
    assert any(e.get("name") == "user_block" for e in user_events)  # the program's profile is whole
    assert int(done.stdout.split("user profile events ")[1].split()[0]) > 50
    ops = _ops(single_trace(job))
    assert ops["aten::tanh"] == 2  # one step before the block, one after; none from inside it
    for command in ("analyze", "parallelism"):
        assert _run(dfcompass_exe, command, job).returncode == 0


@pytest.mark.parametrize("kind, mode", [("cnn", "default"), ("transformer", "graph-break"), ("cnn", "fullgraph"),
                                        ("cnn", "reduce-overhead")])
def test_compiled_programs_run_and_show_their_graphs(tmp_path: Path, dfcompass_exe: list[str], kind: str,
                                                     mode: str) -> None:
    job = tmp_path / "job"
    steps = 4
    done = _record(dfcompass_exe, job, str(PROGRAMS / "compiled.py"), kind, mode, "cpu", str(steps))
    assert "loss" in done.stdout
    trace = single_trace(job)
    ops = _ops(trace)
    graphs = ops["inductor::compiled_graph"]
    # forward and backward graphs per step; a graph break splits the forward in two. KNOWN LOSS
    # (issue 35): while the first step compiles (seconds on a cold inductor cache) a profile
    # window can end and lose that step's graph calls, which torch.profiler alone shows; the
    # steps after it must show every graph.
    per_step = 4 if mode == "graph-break" else 2
    assert graphs >= per_step * (steps - 1), ops
    assert ops["aten::_fused_sgd_"] + ops["aten::add_"] > 0  # the eager optimizer step is still there
    names = read_trace(trace).table("node_begin").text("name").tolist()
    assert all("[graph " in n for n, op in zip(names, read_trace(trace).table("node_begin").text("op").tolist())
               if op == "inductor::compiled_graph")
    edges = read_trace(trace).table("tensor_edge")
    assert len(edges) > 0
    assert _run(dfcompass_exe, "parallelism", job).returncode == 0


def test_torchrun_job_takes_every_command_on_rank_0(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    job = tmp_path / "job"
    _record(dfcompass_exe, job, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            str(PROGRAMS / "ddp_train.py"))
    found = Counter(roles(job_traces(job)).values())
    assert found == Counter({"rank": 2, "launcher": 1}), found
    for command in (("info",), ("analyze", "--in-process"), ("build-analyses", "-o", tmp_path / "tc"),
                    ("parallelism",), ("recommend-placement", "--devices", "cpu,cuda:0", "-o", tmp_path / "plan"),
                    ("report", "-o", tmp_path / "r.html", "--in-process"), ("ranks", "--in-process")):
        done = _run(dfcompass_exe, command[0], job, *command[1:])
        assert done.returncode == 0, (command, done.stderr[-2000:])
        if command[0] in ("parallelism", "recommend-placement"):
            assert "reading rank 0 (pid" in done.stderr and "launcher (pid" in done.stderr, done.stderr
    assert "launcher (pid" in _run(dfcompass_exe, "info", job).stdout
