"""A job folder of one program is one program: each process's role, and the main one chosen.

The jobs are written by our own tracer (tracer.Session with the environment entries that
tracer.job writes for each process of a recorded run), so every shape is a few milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tracer
from tc_analyses.errors import ConfigurationError
from tc_analyses.reader.job import (CHILD, LAUNCHER, MAIN, NO_OP, RANK, WORKER, choose_process, job_traces, roles,
                                    single_trace)
from tracer import schema


def _process(job: Path, pid: int, ppid: int, ops: int, **env: str | int) -> Path:
    """One process's trace in `job`, as `dfcompass record` lays it out, with `ops` nodes."""
    path = job / f"host-{pid}"
    with tracer.Session(path, env={"pid": pid, schema.ENV_PPID: ppid, **env}, handle_signals=False):
        for i in range(ops):
            with tracer.node(f"n{i}", op="work"):
                pass
    return path


@pytest.fixture()
def loader_job(tmp_path: Path) -> Path:
    """A training program (pid 300, started by `record`, pid 299) with two DataLoader workers."""
    _process(tmp_path, 300, 299, 5)
    for pid in (1002, 310):
        _process(tmp_path, pid, 300, 8, **{schema.ENV_PROCESS_ROLE: schema.DATA_LOADER_WORKER})
    return tmp_path


def test_dataloader_workers_are_named_and_the_main_process_is_read(loader_job: Path) -> None:
    processes = job_traces(loader_job)
    found = {p.pid: role for p in processes for path, role in roles(processes).items() if path == p.path}
    assert found == {300: MAIN, 310: WORKER, 1002: WORKER}
    chosen = choose_process(loader_job)
    assert chosen.path == loader_job / "host-300"  # the workers recorded more ops: the role decides
    assert "reading the main process (pid 300)" in chosen.notice
    assert "2 DataLoader workers (pids 310, 1002)" in chosen.notice  # numeric order, not string order
    assert single_trace(loader_job) == chosen.path


def test_torchrun_launcher_is_recognised_and_rank_0_is_read(tmp_path: Path) -> None:
    _process(tmp_path, 50, 49, 0)  # torchrun: no op of its own
    for rank, pid in ((1, 61), (0, 62)):
        _process(tmp_path, pid, 50, 3, rank=rank, world_size=2)
    processes = job_traces(tmp_path)
    assert [p.rank for p in processes] == [0, 1, None]
    assert sorted(roles(processes).values()) == [LAUNCHER, RANK, RANK]
    chosen = choose_process(tmp_path)
    assert chosen.path == tmp_path / "host-62"
    assert "reading rank 0 (pid 62), the main process" in chosen.notice
    assert "launcher (pid 50)" in chosen.notice


def test_process_option_picks_by_rank_pid_folder_and_refuses_the_unknown(tmp_path: Path) -> None:
    _process(tmp_path, 50, 49, 0)
    for rank, pid in ((0, 61), (1, 62)):
        _process(tmp_path, pid, 50, 3, rank=rank, world_size=2)
    assert choose_process(tmp_path, "rank 1").path == tmp_path / "host-62"
    assert choose_process(tmp_path, "50").path == tmp_path / "host-50"
    assert choose_process(tmp_path, "host-61").path == tmp_path / "host-61"
    assert "as --process said" in choose_process(tmp_path, "rank 1").notice
    with pytest.raises(ConfigurationError, match="no process 'rank 7' in this job .*rank 0 \\(pid 61\\)"):
        choose_process(tmp_path, "rank 7")
    with pytest.raises(ConfigurationError, match="needs a job folder"):
        choose_process(tmp_path / "host-61", "rank 1")


def test_children_and_a_job_without_roles(tmp_path: Path) -> None:
    """mp.Process children (hogwild) are children; traces from before the roles fall back on ops."""
    _process(tmp_path, 70, 69, 2)
    _process(tmp_path, 71, 70, 9)
    assert sorted(roles(job_traces(tmp_path)).values()) == [CHILD, MAIN]
    assert choose_process(tmp_path).path == tmp_path / "host-70"
    old = tmp_path / "old"
    for pid, ops in ((5, 0), (6, 4)):
        path = old / f"h-{pid}"
        with tracer.Session(path, env={"pid": pid}, handle_signals=False):
            for i in range(ops):
                with tracer.node(f"n{i}", op="work"):
                    pass
    assert sorted(roles(job_traces(old)).values()) == [MAIN, NO_OP]
    assert choose_process(old).path == old / "h-6"


def test_a_trace_or_a_job_of_one_needs_no_notice(tmp_path: Path) -> None:
    path = _process(tmp_path, 80, 79, 1)
    assert choose_process(path).notice == "" and choose_process(path).path == path
    assert choose_process(tmp_path).notice == "" and choose_process(tmp_path).path == path


def test_a_ranks_dataloader_workers_are_workers_not_ranks(tmp_path: Path) -> None:
    """A rank's workers inherit its RANK: the recorder's role note wins."""
    _process(tmp_path, 50, 49, 0)
    for rank, pid in ((0, 61), (1, 62)):
        _process(tmp_path, pid, 50, 3, rank=rank, world_size=2)
    for pid in (70, 71):
        _process(tmp_path, pid, 61, 9, rank=0, world_size=2,
                 **{schema.ENV_PROCESS_ROLE: schema.DATA_LOADER_WORKER})
    processes = job_traces(tmp_path)
    assert sorted(roles(processes).values()) == sorted([LAUNCHER, RANK, RANK, WORKER, WORKER])
    assert [p.rank for p in processes if p.pid in (70, 71)] == [None, None]
    assert choose_process(tmp_path, "rank 0").path == tmp_path / "host-61"


def test_a_trace_written_into_the_job_folder_later_is_not_the_main_process(tmp_path: Path) -> None:
    """recommend-placement -o JOB/plan writes a predicted trace there: many ops, no ppid."""
    _process(tmp_path, 300, 299, 3)
    with tracer.Session(tmp_path / "plan-predicted", env={"pid": 1}, handle_signals=False):
        for i in range(20):
            with tracer.node(f"p{i}", op="work"):
                pass
    chosen = choose_process(tmp_path)
    assert chosen.path == tmp_path / "host-300"
    assert "trace not of the run" in chosen.notice
