"""Damaged traces: `dfcompass info` says what and where in one line, exit 1, never a traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import read_trace
from tests.helpers import record_nodes, requires_bt2, subprocess_env
from tests.test_reader.damage import CASES, NODES, PACKET_SIZE, Expected


@pytest.fixture
def good_trace(make_trace: Any) -> Path:
    path = make_trace(record_nodes(NODES), name="trace", packet_size=PACKET_SIZE)
    read_trace(path)  # it is good before the damage
    return path


def _check_message(stderr: str, stdout: str, expected: Expected) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("dfcompass: error: ")
    assert "Traceback" not in stderr + stdout
    assert stdout == ""
    if expected.offset is None:
        assert f"{expected.file}: " in line
        assert "at byte" not in line
    else:
        assert f"{expected.file}: at byte {expected.offset}: " in line
    assert expected.phrase in line


@pytest.mark.parametrize("case", sorted(CASES))
def test_reader_raises_trace_error(good_trace: Path, case: str) -> None:
    expected = CASES[case](good_trace)
    with pytest.raises(TraceError) as caught:
        read_trace(good_trace)
    assert caught.value.path == str(expected.file)
    assert caught.value.offset == expected.offset
    assert expected.phrase in caught.value.problem


@pytest.mark.parametrize("case", sorted(CASES))
def test_info_in_process(good_trace: Path, case: str, cli: Callable[..., Any]) -> None:
    expected = CASES[case](good_trace)
    result = cli("info", good_trace)
    assert result.exit_code == 1
    _check_message(result.stderr, result.stdout, expected)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_info_subprocess(good_trace: Path, case: str, dfcompass_exe: list[str]) -> None:
    expected = CASES[case](good_trace)
    done = subprocess.run([*dfcompass_exe, "info", str(good_trace)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    assert done.returncode == 1
    _check_message(done.stderr, done.stdout, expected)


@pytest.mark.parametrize("case", ["truncated_mid_packet", "bad_magic", "missing_metadata"])
def test_info_json_fails_the_same_way(good_trace: Path, case: str, cli: Callable[..., Any]) -> None:
    expected = CASES[case](good_trace)
    result = cli("info", "--format", "json", good_trace)
    assert result.exit_code == 1
    _check_message(result.stderr, result.stdout, expected)


@requires_bt2
@pytest.mark.parametrize("reader", ["auto", "bt2"])
def test_info_on_unparsable_tsdl(tmp_path: Path, reader: str, dfcompass_exe: list[str]) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "metadata").write_text("/* CTF 1.8 */\ntrace { this is not TSDL\n")
    done = subprocess.run([*dfcompass_exe, "info", "--reader", reader, str(trace)], capture_output=True, text=True,
                          env=subprocess_env(), timeout=60)
    assert done.returncode == 1, done.stderr[-300:]
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("dfcompass: error: ")
    assert str(trace) in done.stderr
