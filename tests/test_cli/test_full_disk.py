"""A write that fails half way (a full disk) makes an import fail in one line naming the trace,
never exit 0 with a trace of 0 events (issue 37, item 4).

Two full disks: the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) of the dfcompass process, which
cuts its writes short the way a full disk does, and a real one, a tiny tmpfs mounted in a private
mount namespace (skipped where unshare cannot make one), whose writes fail with ENOSPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import subprocess_env

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
from tc_analyses.cli import main
sys.argv = ["dfcompass", *sys.argv[1:]]
main()
"""


def _kineto(path: Path, ops: int) -> Path:
    t0 = 1_700_000_000_000_000
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 50}", "pid": 1, "tid": 1, "ts": t0 + 10 * k,
               "dur": 5, "args": {"External id": k}} for k in range(ops)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_an_import_onto_a_full_disk_fails_in_one_line(tmp_path: Path) -> None:
    src, out = _kineto(tmp_path / "big.json", 3000), tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", LIMITED, "import-kineto", str(src), "-o", str(out)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"dfcompass: error: {out}: the trace was not written whole ({out}/") and "short write" in line
    small = subprocess.run([sys.executable, "-c", LIMITED, "import-kineto", str(_kineto(tmp_path / "s.json", 20)),
                            "-o", str(tmp_path / "small")], capture_output=True, text=True, env=subprocess_env(),
                           timeout=300)
    assert small.returncode == 0, small.stderr  # what fits is written as before


NODES = 20_000
FILLER = f"""
import tracer
for i in range({NODES}):
    with tracer.node("n%d" % (i % 100), op="work"):
        pass
"""


def _in_small_tmpfs(folder: Path, command: str, size: str = "160k", options: str = "") -> subprocess.CompletedProcess[str]:
    """`command` (a shell line) with `folder` a tmpfs of `size`: a disk that really fills (ENOSPC),
    mounted in a private mount namespace (unshare; root not needed where user namespaces are on)."""
    import shutil

    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: no private tmpfs to fill")
    folder.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size={size} tmpfs {folder}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private tmpfs here ({probe.stderr.strip()})")
    mount = f"mount -t tmpfs -o size={size} tmpfs {folder}" + (f" && mount -o remount,{options} {folder}" if options else "")
    return subprocess.run(["unshare", "-rm", "sh", "-c", f"{mount} && {command}"],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)


def test_record_onto_a_disk_that_fills_leaves_a_readable_trace_and_its_discards(tmp_path: Path) -> None:
    """The traced program's writes fail half way (ENOSPC on a full tmpfs): each stream file keeps
    whole packets only (readable without repair) and every event not written is counted as
    discarded, in the trace itself (the last packet carries the count when no new one fits)."""
    from tc_analyses.reader.fast import read_trace
    from tests.helpers import check_packets

    prog = tmp_path / "prog.py"
    prog.write_text(FILLER)
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    record = f"{sys.executable} -m tc_analyses.cli record --no-calibrate -o {disk}/job -- {sys.executable} {prog}"
    done = _in_small_tmpfs(disk, f"{record}; code=$?; cp -r {disk}/job {kept}; exit $code")
    assert done.returncode == 0, done.stderr  # the program's own code: it did not fail
    assert "the disk is full" in done.stderr and "counted as discarded" in done.stderr
    assert "Traceback" not in done.stderr
    assert "events were not written and are reported as discarded" in done.stderr
    [process] = [p for p in kept.iterdir() if p.is_dir()]
    check_packets(process)  # whole packets: no `dfcompass repair` needed
    trace = read_trace(process)
    written = len(trace.table("node_begin")) + len(trace.table("node_end"))
    assert 0 < written < 2 * NODES and trace.discarded > 0
    assert written + trace.discarded >= 2 * NODES  # none lost without a count (string defs add to it)


def test_every_output_onto_a_full_disk_is_one_line_naming_it(tmp_path: Path) -> None:
    """A write() that fails names no file: the error names the command's output, exit 1."""
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    xml = Path(__file__).resolve().parents[1] / "cases" / "pattern-precondition" / "analysis.xml"
    disk = tmp_path / "disk"
    commands = {f"{disk}/ba": ["build-analyses", trace, "-o"], f"{disk}/plots": ["analyze", trace, "--plots"],
                f"{disk}/s.csv": ["states", trace, "--xml", xml, "--csv"],
                f"{disk}/s.parquet": ["states", trace, "--xml", xml, "--parquet"],
                f"{disk}/p.json": ["export-perfetto", trace, "-o"], f"{disk}/r.html": ["report", trace, "-o"],
                f"{disk}/plan": ["recommend-placement", trace, "--devices", "cpu:0,cpu:1", "-o"],
                f"{disk}/diff": ["diff", trace, trace, "-o"]}
    lines = [f"said=$({sys.executable} -m tc_analyses.cli {' '.join(map(str, args))} {out} 2>&1); rc=$?; "
             'echo "$said" | tail -1; echo rc=$rc' for out, args in commands.items()]
    fill = f"head -c 4096 /dev/zero > {disk}/fill 2>/dev/null"  # the tmpfs's one page, taken
    done = _in_small_tmpfs(disk, " && ".join([fill + "; true", *[f"({line})" for line in lines]]), size="4k")
    said = [line for line in done.stdout.splitlines() if not line.startswith("rc=")]
    assert len(said) == len(commands), done.stdout + done.stderr
    assert done.stdout.count("rc=1\n") == len(commands), done.stdout
    for out, line in zip(commands, said):
        assert line.startswith(f"dfcompass: error: {out}: cannot write the output (") and "No space left" in line, line


def test_outputs_on_a_read_only_disk_are_one_line_naming_them(tmp_path: Path) -> None:
    """A read-only file system (root is not stopped by a folder's mode, a read-only mount stops
    everyone): each command says which output it cannot write, exit 1."""
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    disk = tmp_path / "disk"
    commands = {f"{disk}/ba": ["build-analyses", trace, "-o"], f"{disk}/r.html": ["report", trace, "-o"],
                f"{disk}/p.json": ["export-perfetto", trace, "-o"], f"{disk}/job": ["record", "-o"]}
    program = tmp_path / "prog.py"
    program.write_text("print('ran')\n")
    lines = [f"said=$({sys.executable} -m tc_analyses.cli {' '.join(map(str, args))} {out}"
             + (f" -- {sys.executable} {program}" if args[0] == "record" else "") + ' 2>&1); rc=$?; '
             'echo "$said" | tail -1; echo rc=$rc' for out, args in commands.items()]
    done = _in_small_tmpfs(disk, " && ".join(f"({line})" for line in lines), options="ro")
    said = [line for line in done.stdout.splitlines() if not line.startswith("rc=")]
    assert len(said) == len(commands), done.stdout + done.stderr
    for (out, args), line in zip(commands.items(), said):
        assert line.startswith("dfcompass: error: ") and out in line and "Read-only file system" in line, line
    assert "ran" not in done.stdout  # record said it before running the program
    assert [code for code in done.stdout.split() if code.startswith("rc=")] == ["rc=1", "rc=1", "rc=1", "rc=2"]
