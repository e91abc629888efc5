"""Foreign CTF traces are read by libbabeltrace2 in a child process: its abort is an error naming the
trace, never the end of dfcompass (issue 37, item 1).

The fuzzer's damaged LTTng traces made libbabeltrace2 abort inside dfcompass's own process (22 of
2,221 runs) while the babeltrace2 command exited 0 on them. The children that die or hang here are
MOCKS (a Python child that kills itself, one that sleeps): which damage makes the real library abort
depends on its version. The real bt2 child reads every other trace in the reader tests; with
../shared, a damaged LTTng trace that aborts this machine's library is read too, when one is found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tc_analyses.errors import TraceError
from tc_analyses.reader import bt2_source
from tests.helpers import REPO_ROOT

TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"


def _mock_child(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    monkeypatch.setattr(bt2_source, "child_command", lambda path, with_fields: [sys.executable, "-c", code])


def test_a_child_killed_by_a_signal_is_a_trace_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _mock_child(monkeypatch, "import os, signal, sys\nprint('graph.c:582 API function called while current thread "
                             "has an error', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGABRT)")
    with pytest.raises(TraceError, match=r"all-classes: babeltrace2 crashed reading it \(SIGABRT\): the trace is "
                                         r"damaged; it said: graph.c:582 API function called"):
        list(bt2_source.iter_trace(TRACE))


def test_a_child_that_stops_without_a_word_is_a_trace_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _mock_child(monkeypatch, "import sys\nsys.exit(3)")
    with pytest.raises(TraceError, match=r"the babeltrace2 reader stopped \(exit status 3\)"):
        list(bt2_source.iter_trace(TRACE))


def test_a_silent_child_past_its_budget_is_a_trace_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _mock_child(monkeypatch, "import time\ntime.sleep(30)")
    monkeypatch.setattr(bt2_source, "MIN_SECONDS", 0.5)
    monkeypatch.setattr(bt2_source, "SECONDS_PER_MB", 0)
    monkeypatch.setattr(bt2_source, "START_SECONDS", 0)
    with pytest.raises(TraceError, match="babeltrace2 gave nothing for 0 s"):
        list(bt2_source.iter_trace(TRACE))


def test_the_real_child_reads_what_the_library_reads() -> None:
    """Events cross the pipe whole: the child's records equal the library's, read in this process."""
    pytest.importorskip("bt2")
    here = list(bt2_source._read_in_process(str(TRACE), True))
    assert here and list(bt2_source.iter_trace(TRACE)) == here


def test_a_bt2_error_in_the_child_is_the_same_one_line(tmp_path: Path) -> None:
    pytest.importorskip("bt2")
    (tmp_path / "metadata").write_text("/* CTF 1.8 */\ntrace { this is not TSDL\n")
    with pytest.raises(TraceError) as raised:
        list(bt2_source.iter_trace(tmp_path))
    assert str(raised.value).startswith(f"{tmp_path}: babeltrace2: ") and "\n" not in str(raised.value)
