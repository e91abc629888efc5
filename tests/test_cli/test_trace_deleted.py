"""A trace deleted while a command reads it (a cleanup job, a user's `rm -r` in another shell):
one line naming what went missing, exit 1, never a traceback (issue 37)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader import streams

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


@pytest.mark.parametrize("command", [["info"], ["analyze"], ["critical-path"], ["export-perfetto", "-o", "{out}"]])
def test_a_trace_deleted_while_it_is_read(tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
                                          command: list[str]) -> None:
    trace = tmp_path / "trace"
    shutil.copytree(TRACE, trace)
    mapped = streams.map_file

    def map_then_delete(path: Path) -> memoryview:  # the first stream file is read, then all is gone
        data = mapped(path)
        shutil.rmtree(trace, ignore_errors=True)
        return data

    monkeypatch.setattr(streams, "map_file", map_then_delete)
    args = [a.replace("{out}", str(tmp_path / "out.json")) for a in command]
    result = cli(args[0], trace, *args[1:])
    assert result.exit_code == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"dfcompass: error: {trace}") and "No such file or directory" in line, line
    assert not trace.exists()  # the deletion happened during the read
