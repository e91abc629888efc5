"""Each command reads its trace once, and the command line starts without the heavy libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tc_analyses.reader.fast as fast
from tests.helpers import REPO_ROOT

TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every trace directory the numpy reader opens during the test, in order."""
    opened: list[Path] = []
    original = fast.read_trace

    def counting(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(Path(path).resolve())
        return original(path, *args, **kwargs)

    monkeypatch.setattr(fast, "read_trace", counting)
    for module in list(sys.modules.values()):  # modules that imported the function by name
        if module is not None and getattr(module, "read_trace", None) is original:
            monkeypatch.setattr(module, "read_trace", counting)
    return opened


@pytest.mark.parametrize("args", [
    ["analyze", str(TRACE)],
    ["analyze", str(TRACE), "--format", "json"],
    ["report", str(TRACE), "-o", "{tmp}/report.html"],
    ["report", str(TRACE), "--devices", "cpu,cuda:0", "-o", "{tmp}/report.html"],
], ids=["analyze", "analyze-json", "report", "report-placement"])
def test_a_command_reads_its_trace_once(cli: Any, reads: list[Path], tmp_path: Path, args: list[str]) -> None:
    result = cli(*[a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 0, result.stderr
    assert reads.count(TRACE.resolve()) == 1


def test_the_command_line_starts_without_the_analysis_libraries() -> None:
    # `dfcompass --help` must answer at once: numpy, networkx, scipy and matplotlib load per command.
    code = ("import sys, tc_analyses.cli; "
            "print(' '.join(m for m in ('numpy', 'networkx', 'scipy', 'matplotlib', 'lxml', 'jinja2', 'rich') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == ""
