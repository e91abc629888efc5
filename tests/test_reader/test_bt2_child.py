"""A trace that makes libbabeltrace2 abort is read first in a child: an error, not the end of dfcompass.

The aborting babeltrace2 here is a MOCK (a script on PATH that kills itself with SIGABRT): the
damaged LTTng traces that abort the real library came from a fuzzer and are not kept here. The
real babeltrace2 is used by the other reader tests, through the same check.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tc_analyses.errors import TraceError
from tc_analyses.reader import bt2_source
from tests.helpers import REPO_ROOT

TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"


def _fake_babeltrace2(folder: Path, body: str) -> None:
    exe = folder / "babeltrace2"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_a_child_killed_by_a_signal_is_a_trace_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_babeltrace2(tmp_path, 'echo "ctf-fs: cannot decode packet" >&2; kill -ABRT $$')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(TraceError, match=r"babeltrace2 crashed reading it \(SIGABRT\): the trace is damaged; "
                                         r"it said: ctf-fs: cannot decode packet"):
        next(iter(bt2_source.iter_trace(TRACE)))


def test_a_child_past_its_budget_is_a_trace_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_babeltrace2(tmp_path, "sleep 30")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(bt2_source, "MIN_SECONDS", 0.5)
    monkeypatch.setattr(bt2_source, "SECONDS_PER_MB", 0)
    with pytest.raises(TraceError, match="did not finish reading it within"):
        next(iter(bt2_source.iter_trace(TRACE)))


def test_a_healthy_trace_passes_the_check() -> None:
    bt2_source.check_in_child(str(TRACE))  # the real babeltrace2, when installed: no error
