"""Errors say what is wrong in the user's words, one line each (issue 39): a path that does not
exist, a CTF trace given to import-kineto, a Kineto file given to analyze, a script that is not there."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path
from typing import Any, Callable

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


def _one_line(result: Any, code: int, *said: str) -> str:
    assert result.exit_code == code, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert all(s in line for s in said), line
    return line


def test_a_missing_path_does_not_exist(tmp_path: Path, cli: Callable[..., Any]) -> None:
    for command in ("analyze", "info", "critical-path"):
        _one_line(cli(command, tmp_path / "nope"), 1, f"{tmp_path / 'nope'}: does not exist")


def test_a_ctf_trace_given_to_import_kineto(tmp_path: Path, cli: Callable[..., Any]) -> None:
    _one_line(cli("import-kineto", TRACE, "-o", tmp_path / "out"), 1,
              f"{TRACE}: is a CTF trace: give it to analyze (or any analysis), not import-kineto")
    folder = tmp_path / "folder"
    folder.mkdir()
    _one_line(cli("import-kineto", folder, "-o", tmp_path / "out"), 1, "is a folder; import-kineto takes Kineto files")
    assert not (tmp_path / "out").exists()


def test_a_kineto_file_given_to_analyze(tmp_path: Path, cli: Callable[..., Any]) -> None:
    kineto = tmp_path / "prof.json.gz"
    kineto.write_bytes(gzip.compress(b'{"traceEvents": []}'))
    _one_line(cli("analyze", kineto), 1, f"dfcompass import-kineto {kineto} -o DIR")


def test_a_script_that_is_not_there_runs_nothing(tmp_path: Path, cli: Callable[..., Any]) -> None:
    out = tmp_path / "job"
    _one_line(cli("record", "-o", out, "--", sys.executable, tmp_path / "nosuch.py"), 2,
              f"{tmp_path / 'nosuch.py'}: does not exist")
    _one_line(cli("record", "-o", out, "--", tmp_path / "nosuch.py"), 2, "does not exist")
    assert not out.exists()


def test_each_demo_writes_its_own_folder(cli: Callable[..., Any], monkeypatch: Any) -> None:
    """Without -o, the demos of different workloads write different folders (the torch run's plots
    never sit beside the TF trace)."""
    import tc_analyses.app.demo as demo_module

    folders = []
    monkeypatch.setattr(demo_module, "demo", lambda output, *args: folders.append(output))
    for args in ([], ["--framework", "tf"], ["--workload", "pipeline"], ["--workload", "ddp"]):
        assert cli("demo", *args).exit_code == 0
    assert folders == [Path("demo-out"), Path("demo-out-tf"), Path("demo-out-pipeline"), Path("demo-out-ddp")]


def test_the_script_of_a_command_line() -> None:
    from tc_analyses.app.record import _script_of

    assert [_script_of(c) for c in (["prog.py"], ["python3", "-u", "prog.py"], ["python", "-X", "dev", "p.py"],
                                    ["/usr/bin/python3.11", "a.py"])] == ["prog.py", "prog.py", "p.py", "a.py"]
    assert all(_script_of(c) is None for c in (["python", "-m", "x"], ["python", "-c", "1"], ["python", "-"],
                                               ["python", "-mfoo"], ["python3-coverage", "run", "p.py"]))


def test_a_relative_trace_path_gives_the_short_reasons(cli: Callable[..., Any], monkeypatch: Any) -> None:
    monkeypatch.chdir(TRACE.parent)
    line = [l for l in cli("analyze", TRACE.name).stdout.splitlines() if "not available on this trace" in l]
    assert line == ["  not available on this trace: eager-overhead (no eager op dispatches)"]


def test_the_workload_notices_dropped_are_only_the_frameworks() -> None:
    from tc_analyses.app.record import FRAMEWORK_NOTICE

    dropped = ["WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
               "I0000 00:00:1795970783.099297   31273 port.cc:153] oneDNN custom operations are on.",
               "I0000 00:00:1795970808.453676   31431 cpu_feature_guard.cc:227] This TensorFlow binary",
               "To enable the following instructions: AVX2 AVX512F, in other operations, rebuild"]
    kept = ["Traceback (most recent call last):", "E0000 00:00:1.0 1 port.cc:1] an error", "step 3 done"]
    assert all(FRAMEWORK_NOTICE.match(line) for line in dropped)
    assert not any(FRAMEWORK_NOTICE.match(line) for line in kept)
