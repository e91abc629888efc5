"""build-analyses on a job folder: analyses that fit every process, valid for Trace Compass, run
headless over each process of the folder (the experiment Trace Compass opens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import tracer
from tracer import schema


def _job(tmp_path: Path) -> Path:
    """A main process with ops and memory, and a DataLoader worker with ops only (our tracer)."""
    job = tmp_path / "job"
    with tracer.Session(job / "host-300", env={"pid": 300, schema.ENV_PPID: 299}, handle_signals=False) as s:
        for i in range(3):
            with tracer.node(f"step{i}", op="aten::addmm") as n:
                n.output([i])
        cpu = s.device("cpu")
        s.emit("mem_alloc", cpu, 4096, 64, 64)
    with tracer.Session(job / "host-301", env={"pid": 301, schema.ENV_PPID: 300,
                                               schema.ENV_PROCESS_ROLE: schema.DATA_LOADER_WORKER},
                        handle_signals=False):
        with tracer.node("collate", op="aten::stack"):
            pass
    return job


def test_job_analyses_pass_the_xsd_and_run_over_the_folder(tmp_path: Path, tc_xsd: Path,
                                                           cli: Callable[..., Any]) -> None:
    job = _job(tmp_path)
    built = cli("build-analyses", job, "-o", tmp_path / "tc", "--validate", "--xsd", tc_xsd)
    assert built.exit_code == 0, built.stderr
    assert "validated" in built.stdout and "reading" not in built.stderr  # the whole job, not one process
    readme = (tmp_path / "tc" / "README.md").read_text()
    assert "Open As Experiment" in readme
    assert "host-300: main process (pid 300)" in readme and "host-301: DataLoader worker (pid 301)" in readme
    xml = sorted((tmp_path / "tc" / "xml").glob("*.xml"))
    assert any("memory" in p.name for p in xml)  # the main process's memory events called for it
    for process in ("host-300", "host-301"):  # each process's trace, as Trace Compass runs them
        run = cli("states", job, "--process", process, *[a for p in xml for a in ("--xml", p)], "--path", "*")
        assert run.exit_code == 0, run.stderr
        assert run.stdout.strip(), f"no state intervals for {process}"
