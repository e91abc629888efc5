"""Recording whole jobs: every Python process of a run, one trace each, on one time base."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses import ranks
from tc_analyses.inputs import JobInputs
from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.job import job_traces
from tests.helpers import check_packets, subprocess_env

pytestmark = pytest.mark.slow


def _record(dfcompass_exe: list[str], job: Path, *command: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*dfcompass_exe, "record", "-o", str(job), "--", *command], capture_output=True,
                          text=True, env=subprocess_env(), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done


def _ops(path: Path) -> list[str]:
    return [op for op in read_trace(path).table("node_begin").text("op").tolist()]


MULTIPROCESSING = """
import multiprocessing as mp
import sys
import tracer

def child(name):
    with tracer.node(name, op="child"):
        pass

if __name__ == "__main__":
    for method in sys.argv[1:]:
        p = mp.get_context(method).Process(target=child, args=("child-" + method,))
        p.start()
        p.join()
        assert p.exitcode == 0
"""


def test_every_multiprocessing_start_method_is_followed(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    script = tmp_path / "mp_children.py"
    script.write_text(MULTIPROCESSING)
    _record(dfcompass_exe, tmp_path / "job", sys.executable, str(script), "fork", "spawn", "forkserver")
    names = []
    for trace in job_traces(tmp_path / "job"):
        check_packets(trace.path)
        names += read_trace(trace.path).table("node_begin").text("name").tolist()
    # each child recorded its node; fork children end with os._exit and still flush theirs
    assert sorted(names) == ["child-fork", "child-forkserver", "child-spawn"]


DATALOADER = """
import torch
from torch.utils.data import DataLoader, Dataset

class Items(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.full((8,), float(i))

model = torch.nn.Linear(8, 4)
for epoch in range(2):
    for x in DataLoader(Items(), batch_size=8, num_workers=2):
        model(x).sum().backward()
"""


@pytest.mark.torch
def test_dataloader_workers_record_their_ops(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    script = tmp_path / "loader.py"
    script.write_text(DATALOADER)
    _record(dfcompass_exe, tmp_path / "job", sys.executable, str(script))
    per_process = {t.pid: _ops(t.path) for t in job_traces(tmp_path / "job")}
    workers = [ops for ops in per_process.values() if "aten::full" in ops]
    assert len(workers) == 4  # two workers per epoch
    # the program's own count: 64 items per epoch, each made by one aten::full in a worker
    assert sum(ops.count("aten::full") for ops in workers) == 128
    main = [ops for ops in per_process.values() if "aten::linear" in ops]
    assert len(main) == 1 and main[0].count("aten::linear") == 16


@pytest.mark.torch
def test_a_ddp_job_finds_its_injected_straggler(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    delay_ms = 40
    _record(dfcompass_exe, tmp_path / "job", sys.executable, "-m", "tracer.workloads.ddp", "--ranks", "2",
            "--steps", "4", "--slow-rank", "1", "--delay-ms", str(delay_ms))
    job = JobInputs(tmp_path / "job")
    result: Any = ranks.run(job, {}).data
    assert [p.rank for p in result.ranks] == [0, 1]
    assert len({p.pid for p in result.processes}) == len(result.processes)
    reduces = [c for c in result.collectives if c.kind == "all_reduce"]
    assert len(reduces) == 4 and result.mismatch == ""
    assert {c.last_rank for c in reduces} == {1}
    skews = sorted(c.skew_ns / 1e6 for c in reduces)
    assert 0.75 * delay_ms < skews[len(skews) // 2] < 1.5 * delay_ms, skews
    for inputs in job.inputs:
        trace = inputs.trace
        if len(trace.table("process_rank")):
            assert trace.table("process_rank")["world_size"].tolist() == [2]
            assert trace.table("process_rank").text("backend").tolist() == ["gloo"]
            assert all(b == 132352 for b, k in zip(trace.table("collective")["bytes"].tolist(),
                                                    trace.table("collective").text("kind").tolist())
                       if k == "all_reduce")  # the gradient bucket: (64*256 + 256 + 256*64 + 64) float32


TORCHRUN = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert t.tolist() == [3.0] * 4
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.torch
def test_torchrun_agent_and_workers_are_recorded_with_their_ranks(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    script = tmp_path / "job.py"
    script.write_text(TORCHRUN)
    _record(dfcompass_exe, tmp_path / "job", sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=2", str(script))
    traces = job_traces(tmp_path / "job")
    assert len(traces) == 3  # the elastic agent and two workers
    assert sorted(t.rank for t in traces if t.rank is not None) == [0, 1]  # from torchrun's RANK
    assert all(t.world_size == 2 for t in traces if t.rank is not None)
    result: Any = ranks.run(JobInputs(tmp_path / "job"), {}).data
    assert [c.kind for c in result.collectives] == ["all_reduce", "barrier"]
    assert all(c.bytes in (16, 1) for c in result.collectives)


@pytest.mark.torch
def test_demo_offers_the_ddp_job(tmp_path: Path, cli: Any) -> None:
    result = cli("demo", "-o", tmp_path / "demo", "--workload", "ddp", "--steps", "3")
    assert result.exit_code == 0, result.stderr
    document = json.loads((tmp_path / "demo" / "ranks.json").read_text())
    stragglers = [f["text"] for f in document["findings"] if f["kind"] == "straggler"]
    assert len(stragglers) == 1 and stragglers[0].startswith("rank 1 arrived last"), document["findings"]
    assert (tmp_path / "demo" / "ranks.png").is_file()
    # the story the demo tells ("rank 1 slowed by 20 ms per step") and its numbers agree: rank 1 is
    # the last at the gradient all-reduces, late by about the 20 ms it sleeps (a busy machine adds)
    late = sorted(c["late_by_ns"] for c in document["result"]["collectives"]
                  if c["kind"] == "all_reduce" and c["last_rank"] == 1)
    assert late and 10e6 <= late[len(late) // 2] <= 60e6, late


COMPILE_POOL = """
import multiprocessing as mp
import sys
import tracer

def work():
    with tracer.node("compile", op="compile"):
        pass

if __name__ == "__main__":
    for method in ("fork", "spawn"):
        p = mp.get_context(method).Process(target=work)
        p.start()
        p.join()
        assert p.exitcode == 0
"""


def test_torch_compile_worker_pool_is_not_recorded(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    """Inductor's compile workers (one process per core, no op of the program) stay out of the job,
    with their own children; the program that started them is recorded."""
    pool = tmp_path / "torch" / "_inductor" / "compile_worker" / "__main__.py"
    pool.parent.mkdir(parents=True)
    pool.write_text(COMPILE_POOL)
    program = tmp_path / "program.py"
    program.write_text("import subprocess, sys\nimport tracer\nwith tracer.node('main', op='main'):\n"
                       f"    subprocess.run([sys.executable, {str(pool)!r}], check=True)\n")
    job = tmp_path / "job"
    _record(dfcompass_exe, job, sys.executable, str(program))
    traces = job_traces(job)
    assert len(traces) == 1, [t.path.name for t in traces]
    assert _ops(traces[0].path) == ["main"]
