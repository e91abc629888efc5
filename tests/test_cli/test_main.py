"""The command group: help, version, and usage errors of every subcommand."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.helpers import subprocess_env


def _subcommands(help_text: str) -> list[str]:
    section = help_text.split("Commands:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^\s{2}(\w[\w-]*)\s", section, re.M)]


def test_help_lists_the_subcommands(cli: Callable[..., Any]) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    assert {"info", "record", "repair", "demo"} <= set(_subcommands(result.stdout))


def test_every_subcommand_needs_its_arguments(cli: Callable[..., Any]) -> None:
    commands = _subcommands(cli("--help").stdout)
    assert commands
    for command in commands:
        if command == "demo":  # has defaults for everything: check its help instead
            result = cli(command, "--help")
            assert result.exit_code == 0 and "--output" in result.stdout
            continue
        result = cli(command)
        assert result.exit_code == 2, f"dfcompass {command}: exit {result.exit_code}"
        assert "Usage:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_help_and_version_as_a_subprocess(dfcompass_exe: list[str]) -> None:
    done = subprocess.run([*dfcompass_exe, "--help"], capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert done.returncode == 0 and "Commands:" in done.stdout
    version = subprocess.run([*dfcompass_exe, "--version"], capture_output=True, text=True, env=subprocess_env(),
                             timeout=60)
    assert version.returncode == 0 and re.search(r"\d+\.\d+\.\d+", version.stdout)


@pytest.mark.parametrize("args", [("info", "--help"), ("repair", "--help"), ("record", "--help"), ("-h",)])
def test_help_everywhere(cli: Callable[..., Any], args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.exit_code == 0 and "Usage:" in result.stdout


def test_unknown_command(cli: Callable[..., Any]) -> None:
    result = cli("no-such-command")
    assert result.exit_code == 2 and "No such command" in result.stderr


@pytest.mark.parametrize("args", [
    ["analyze", "{trace}", "--device", "NOPE"],
    ["report", "{trace}", "--device", "Z80", "-o", "{tmp}/r.html"],
    ["roofline", "{trace}", "--device", "Z80"],
    ["recommend-placement", "{trace}", "--devices", "gpu7", "-o", "{tmp}/p"],
    ["report", "{trace}", "--devices", "cpu,cpu", "-o", "{tmp}/r.html"],
    ["parallelism", "{trace}", "--device", "tpu"],
    ["overhead", "{trace}", "{trace}", "--labels", "1"],
    ["overhead", "{trace}", "{trace}", "--labels", "1,1"],
], ids=["analyze-device", "report-device", "roofline-device", "devices", "devices-twice", "parallelism-device",
        "labels-count", "labels-twice"])
def test_bad_devices_and_labels_are_usage_errors(cli: Any, tmp_path: Path, args: list[str]) -> None:
    """An unknown device or a bad label list exits 2 and names it; never a silent 'not available'."""
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    result = cli(*[a.format(trace=trace, tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert any(word in result.stderr for word in ("NOPE", "Z80", "gpu7", "twice", "tpu", "label"))


def test_a_section_the_trace_cannot_feed_is_not_an_error(cli: Any, tmp_path: Path) -> None:
    from tc_analyses.errors import AnalysisUnavailable, ConfigurationError, GraphError

    assert issubclass(GraphError, AnalysisUnavailable) and not issubclass(ConfigurationError, AnalysisUnavailable)
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    assert cli("analyze", trace, "--device", "H100").exit_code == 0


@pytest.mark.parametrize("args", [
    ["analyze"],
    ["parallelism", "{trace}", "--max-streams", "0"],
    ["analyze", "{trace}", "--section", "nope"],
    ["no-such-command"],
    ["roofline", "{trace}", "{trace}"],  # two runs with the same folder name: label them
], ids=["missing-argument", "range", "choice", "command", "repeated-label"])
def test_usage_errors_are_one_line_with_the_usage(cli: Any, args: list[str]) -> None:
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    result = cli(*[a.format(trace=trace) for a in args])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dfcompass: error: ")
    assert "(Usage: " in result.stderr or "label" in result.stderr  # in-process, click names the program "main"


def test_only_the_roofline_trajectory_has_an_axis(cli: Any) -> None:
    assert "--axis" in cli("roofline", "--help").stdout and "--axis" not in cli("overhead", "--help").stdout


def test_an_analysis_without_a_report_module_lists_its_findings() -> None:
    from tc_analyses.analyses.result import Finding, Result
    from tc_analyses.registry import Entry

    bare = Entry("x", "X", "x", "tc_analyses.analyses.memory", {})
    assert bare.text(Result("x", "t", None, ())) == "trace: t\n\nfindings:\n  none\n"
    assert bare.text(Result("x", "t", None, (Finding("k", 0, "a"),))).endswith("findings:\n  - a\n")
    assert bare.plots(Result("x", "t", None, ()), Path("/nonexistent")) == [] and bare.artifacts_note == ""


def test_demo_framework_tf_takes_no_other_workload(cli: Any, tmp_path: Path) -> None:
    result = cli("demo", "--framework", "tf", "--workload", "ddp", "-o", tmp_path / "out")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--framework tf has its own workload" in result.stderr and not (tmp_path / "out").exists()
