"""Data loading beside a plan: the main process's wait in DataLoader __next__ and its workers' busy time."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import tracer
from tc_analyses.analyses.data_loading import of_job
from tc_analyses.model.activity import read_activity
from tc_analyses.reader.fast import read_trace
from tests.helpers import CountingClock
from tracer import schema

NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _main(path: Path, batches: int, ops_per_batch: int) -> None:
    """Each clock tick is 1 us: a batch wait spans 2 ticks, each op 2 ticks."""
    session = tracer.Session(path, env={"pid": 300, schema.ENV_PPID: 299}, handle_signals=False,
                             clock=CountingClock(step=1_000), flush_interval=3600.0)
    with session:
        cpu, tid = session.device("cpu"), threading.get_native_id()
        for b in range(batches):
            annotation = session.new_annotation_id()
            session.emit("annotation_begin", cpu, tid, annotation, session.intern(NEXT))
            session.emit("annotation_end", cpu, tid, annotation)
            value: object = [b]
            for i in range(ops_per_batch):  # a chain: each op reads what the one before wrote
                with tracer.node(f"op{b}.{i}", op="aten::addmm", inputs=[value]) as n:
                    value = [b, i]
                    n.output(value)


def _worker(path: Path, pid: int, ops: int) -> None:
    with tracer.Session(path, env={"pid": pid, schema.ENV_PPID: 300, schema.ENV_PROCESS_ROLE: schema.DATA_LOADER_WORKER},
                        handle_signals=False, clock=CountingClock(step=1_000)):
        for i in range(ops):
            with tracer.node(f"w{i}", op="aten::stack"):
                pass


def test_wait_and_worker_time_are_measured_from_the_job(tmp_path: Path) -> None:
    main = tmp_path / "job" / "host-300"
    _main(main, batches=3, ops_per_batch=2)
    _worker(tmp_path / "job" / "host-301", 301, 4)
    _worker(tmp_path / "job" / "host-302", 302, 1)
    loading = of_job(main, read_activity(read_trace(main)))
    assert loading is not None
    assert loading.batches == 3 and loading.workers == 2
    assert loading.wait_ns == 3 * 1_000  # each __next__ spans one tick of the counting clock
    assert loading.workers_busy_ns == (4 + 1) * 1_000
    assert 0 < loading.wait_share < 1
    assert "waited 0.0 ms in 3 DataLoader __next__ calls" in loading.text() and "2 DataLoader workers" in loading.text()


def test_no_workers_or_no_job_gives_nothing(tmp_path: Path) -> None:
    main = tmp_path / "job" / "host-300"
    _main(main, batches=1, ops_per_batch=1)
    assert of_job(main, read_activity(read_trace(main))) is None  # a job of one, no worker
    lone = tmp_path / "lone"
    with tracer.Session(lone, handle_signals=False):  # not recorded by `record`: no job around it
        with tracer.node("n", op="aten::add"):
            pass
    _worker(tmp_path / "host-301", 301, 2)  # a worker-like trace beside it is not its worker
    assert of_job(lone, read_activity(read_trace(lone))) is None


def test_parallelism_shows_it_beside_the_plan(tmp_path: Path, cli: Callable[..., Any]) -> None:
    main = tmp_path / "job" / "host-300"
    _main(main, batches=2, ops_per_batch=3)
    _worker(tmp_path / "job" / "host-301", 301, 2)
    result = cli("parallelism", tmp_path / "job")
    assert result.exit_code == 0, result.stderr
    assert "data loading: the main process waited" in result.stdout
    assert "reading the main process (pid 300)" in result.stderr and "DataLoader worker (pid 301)" in result.stderr
