"""`dfcompass record` and `dfcompass demo`: run a program traced, keep its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.job import job_traces, single_trace
from tests.helpers import check_packets, check_string_defs, subprocess_env

NODES_SCRIPT = """
import sys
import tracer

for i in range(7):
    with tracer.node("n%d" % i, op="work"):
        pass
print("script ran", tracer.active_session() is not None)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "prog.py"
    script.write_text(NODES_SCRIPT)
    return script


def _record(dfcompass_exe: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*dfcompass_exe, "record", *args], capture_output=True, text=True,
                          env=subprocess_env(), timeout=120)


def test_record_a_python_program(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    out = tmp_path / "trace"
    done = _record(dfcompass_exe, "-o", str(out), "--", sys.executable, str(_script(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert "script ran True" in done.stdout
    assert f"trace written to {out}" in done.stderr
    trace = read_trace(out)
    assert trace.table("node_begin").text("name").tolist() == [f"n{i}" for i in range(7)]
    assert len(trace.table("node_end")) == 7
    assert trace.table("process_info").text("name").tolist() == [str(_script(tmp_path))]
    check_packets(single_trace(out))
    check_string_defs(trace)
    assert (out / "calibration.json").is_file()  # the machine's lane costs, for plans from this run


def test_record_a_script_path_directly(tmp_path: Path, cli: Callable[..., Any]) -> None:
    out = tmp_path / "trace"
    result = cli("record", "-o", out, "--", _script(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert len(read_trace(out).table("node_begin")) == 7


def test_exit_code_is_passed_through_and_trace_kept(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    out = tmp_path / "trace"
    done = _record(dfcompass_exe, "-o", str(out), "--", sys.executable, str(_script(tmp_path)), "3")
    assert done.returncode == 3
    assert "exited with code 3" in done.stderr and "still readable" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(read_trace(out).table("node_begin")) == 7
    assert not (out / "calibration.json").exists()  # a failed run is not calibrated


@pytest.mark.slow
def test_existing_trace_needs_overwrite(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    out = tmp_path / "trace"
    script = str(_script(tmp_path))
    assert _record(dfcompass_exe, "-o", str(out), "--", sys.executable, script).returncode == 0
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    done = _record(dfcompass_exe, "-o", str(out), "--", sys.executable, script)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfcompass: error: ")
    assert str(out) in lines[0] and "--overwrite" in lines[0]
    assert "script ran" not in done.stdout  # the program did not run
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    (out / "notes.txt").write_text("mine")
    again = _record(dfcompass_exe, "-o", str(out), "--overwrite", "--", sys.executable, script)
    assert again.returncode == 0, again.stderr
    assert len(read_trace(out).table("node_begin")) == 7  # the old process trace is gone: one left
    assert (out / "notes.txt").read_text() == "mine"  # --overwrite removes traces, nothing else


def test_command_not_found(tmp_path: Path, cli: Callable[..., Any]) -> None:
    result = cli("record", "-o", tmp_path / "t", "--", "definitely-not-a-command-xyz")
    assert result.exit_code == 2
    assert result.stderr.startswith("dfcompass: error: ") and "command not found" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_non_python_command_is_an_error(tmp_path: Path, cli: Callable[..., Any]) -> None:
    result = cli("record", "-o", tmp_path / "t", "--", "true")
    assert result.exit_code == 1
    assert result.stderr.startswith("dfcompass: error: ") and "no trace was written" in result.stderr
    assert not (tmp_path / "t").exists()  # the folder record made for it is not left empty


def test_a_program_that_wrote_no_trace_keeps_its_exit_code(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Before: exit 1 and "did not start a Python interpreter" whatever happened (issue 37, item 5)."""
    result = cli("record", "-o", tmp_path / "t", "--", "sh", "-c", "exit 5")
    assert result.exit_code == 5
    assert result.stderr.splitlines() == [
        f"dfcompass: error: {tmp_path / 't'}: no trace was written: it ended before its tracer wrote anything "
        "(the program exited with code 5)"]
    killed = cli("record", "-o", tmp_path / "k", "--", "sh", "-c", "kill -9 $$")
    assert killed.exit_code == 128 + 9 and "(the program was killed by SIGKILL)" in killed.stderr


@pytest.mark.parametrize("where", ["file", "device"])
def test_an_output_it_cannot_write_is_said_before_the_program_runs(tmp_path: Path, cli: Callable[..., Any],
                                                                   where: str) -> None:
    marker = tmp_path / "ran"
    output = tmp_path / "out.txt" if where == "file" else Path("/dev/full/trace")
    if where == "file":
        output.write_text("not a folder")
    elif not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    result = cli("record", "-o", output, "--", "sh", "-c", f"touch {marker}")
    assert result.exit_code == 2 and not marker.exists()
    [line] = result.stderr.splitlines()
    assert line.startswith(f"dfcompass: error: {output}: ")
    assert ("is a file; -o names the folder" in line) if where == "file" else ("cannot write the trace there" in line)


CHILD_SCRIPT = (
    "import subprocess, sys, tracer\n"
    "with tracer.node('parent'):\n"
    "    pass\n"
    "child = 'import tracer\\nwith tracer.node(\"child\"):\\n    pass\\nprint(tracer.active_session() is None)'\n"
    "out = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout\n"
    "print('child untraced', out.strip())\n"
)


def test_child_python_processes_record_their_own_trace(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    script = tmp_path / "parent.py"
    script.write_text(CHILD_SCRIPT)
    done = _record(dfcompass_exe, "-o", str(tmp_path / "job"), "--", sys.executable, str(script))
    assert done.returncode == 0, done.stderr
    assert "child untraced False" in done.stdout
    assert "(2 processes)" in done.stderr
    traces = job_traces(tmp_path / "job")
    names = sorted(read_trace(t.path).table("node_begin").text("name").tolist()[0] for t in traces)
    assert names == ["child", "parent"]
    assert len({t.pid for t in traces}) == 2
    for t in traces:
        check_packets(t.path)


def test_follow_off_records_the_first_process_only(tmp_path: Path, cli: Callable[..., Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "parent.py"
    script.write_text(CHILD_SCRIPT)
    monkeypatch.setenv("DFCOMPASS_FOLLOW", "0")
    result = cli("record", "-o", tmp_path / "t", "--", script)
    assert result.exit_code == 0, result.stderr
    assert len(job_traces(tmp_path / "t")) == 1
    assert read_trace(tmp_path / "t").table("node_begin").text("name").tolist() == ["parent"]


def test_a_run_that_records_no_node_says_so(tmp_path: Path, cli: Callable[..., Any]) -> None:
    script = tmp_path / "idle.py"
    script.write_text("print('nothing traced here')\n")
    result = cli("record", "-o", tmp_path / "t", "--", script)
    assert result.exit_code == 0
    assert "warning" in result.stderr and "no dataflow node" in result.stderr and str(tmp_path / "t") in result.stderr


def test_demo(tmp_path: Path, cli: Callable[..., Any]) -> None:
    out = tmp_path / "demo"
    result = cli("demo", "-o", out, "--workload", "pipeline", "--steps", "4")
    assert result.exit_code == 0, result.stderr
    assert (single_trace(out / "trace") / "metadata").is_file()
    info = json.loads((out / "info.json").read_text())
    assert info["events_per_class"]["dfc:node_begin"] == 4 * 9
    assert info["events_per_class"]["dfc:tensor_edge"] == 4 * 9
    assert info["events_per_class"]["dfc:step_begin"] == 4
    assert info["discarded"] == 0
    assert "events:" in result.stdout and str(out.resolve()) in result.stdout
    trace = read_trace(out / "trace")
    check_packets(single_trace(out / "trace"))
    check_string_defs(trace)


@pytest.mark.slow
def test_demo_with_default_steps(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    done = subprocess.run([*dfcompass_exe, "demo", "-o", str(tmp_path / "tmp"), "--workload", "pipeline"],
                          capture_output=True, text=True,
                          env=subprocess_env(), timeout=600)  # a hang guard: the demo verifies a plan in rounds
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tmp" / "trace").is_dir()
    info = json.loads((tmp_path / "tmp" / "info.json").read_text())
    assert info["events_per_class"]["dfc:node_begin"] == 20 * 9


def test_a_signal_python_has_no_name_for_is_still_said() -> None:
    from tc_analyses.app.record import shell_status, signal_name

    assert (signal_name(9), signal_name(40), shell_status(-40), shell_status(3)) == ("SIGKILL", "signal 40", 168, 3)


def test_record_writes_ctf2_when_asked(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    """--ctf 2: every process's metadata is CTF 2 (JSON fragments), the streams read as before."""
    out = tmp_path / "trace"
    done = _record(dfcompass_exe, "--no-calibrate", "--ctf", "2", "-o", str(out), "--", sys.executable,
                   str(_script(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert (single_trace(out) / "metadata").read_bytes()[:1] == b"\x1e"
    trace = read_trace(out)
    assert trace.metadata.ctf_version == "2"
    assert trace.table("node_begin").text("name").tolist() == [f"n{i}" for i in range(7)]
    check_packets(single_trace(out))
