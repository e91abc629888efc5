"""`dfcompass analyze` sections, `report` trajectories: wiring of the seed analyses into the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.registry import TRACE_KEYS, entry

from tests.helpers import fork_join_cpu_trace

ALL_CLASSES = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
# A trace our TensorFlow source recorded (tracer/workloads/tf_models.py, batch 8): eager dispatches.
TF_CNN = Path(__file__).resolve().parents[1] / "data" / "traces" / "tf" / "keras-cnn"
KEYS = sorted(TRACE_KEYS)  # every analysis of one trace is a section
SOURCE_SPECIFIC = {"eager-overhead"}  # needs what only the TensorFlow source records


def _cpu_only(path: Path) -> Path:
    """Two independent nodes and a join, on the CPU, with no shapes and no GPU."""
    return fork_join_cpu_trace(path)


def test_analyze_json_has_every_section(cli: Any) -> None:
    result = cli("analyze", ALL_CLASSES, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert sorted(data["sections"]) == KEYS
    assert all(s["available"] for k, s in data["sections"].items() if k not in SOURCE_SPECIFIC)
    assert "busy" in data  # the summary keeps its top-level keys


def test_source_specific_sections_on_their_sources_trace(cli: Any) -> None:
    result = cli("analyze", TF_CNN, "--format", "json", *(a for k in sorted(SOURCE_SPECIFIC) for a in ("--section", k)))
    assert result.exit_code == 0, result.stderr
    sections = json.loads(result.stdout)["sections"]
    assert all(sections[k]["available"] for k in SOURCE_SPECIFIC), sections


def test_unavailable_sections_say_why(cli: Any, tmp_path: Path) -> None:
    trace = _cpu_only(tmp_path / "cpu")
    result = cli("analyze", trace, "--section", "overhead", "--section", "roofline", "--format", "json")
    assert result.exit_code == 0, result.stderr
    sections = json.loads(result.stdout)["sections"]
    assert sorted(sections) == ["overhead", "roofline"]
    assert not sections["overhead"]["available"] and "no GPU activity" in sections["overhead"]["reason"]
    assert not sections["roofline"]["available"] and "no input shapes" in sections["roofline"]["reason"]
    text = cli("analyze", trace, "--section", "overhead").stdout
    assert "== Runtime overhead (host dispatch and launch against GPU time) ==\nnot available: " in text


def test_no_sections_keeps_the_old_summary(cli: Any) -> None:
    result = cli("analyze", ALL_CLASSES, "--no-sections", "--format", "json")
    assert "sections" not in json.loads(result.stdout)


def test_analyze_writes_plots(cli: Any, tmp_path: Path) -> None:
    result = cli("analyze", ALL_CLASSES, "--section", "memory", "--plots", tmp_path / "plots")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["memory.png", "memory.svg"]


@pytest.mark.slow
def test_report_of_several_traces_leads_with_trajectories(cli: Any, tmp_path: Path) -> None:
    from lxml import html

    out = tmp_path / "r.html"
    result = cli("report", ALL_CLASSES, ALL_CLASSES, "--labels", "2,1", "-o", out)
    assert result.exit_code == 0, result.stderr
    doc = html.fromstring(out.read_text())
    sections = [h.text_content() for h in doc.iter("h2")]
    # the findings of both traces first, then the trajectories, then a section per trace
    assert sections[:2] == ["Findings, by the time at stake", "Trajectory over batch: 2, 1"] and len(sections) == 4
    assert {li.find("a[@class='analysis']").tail.split(":")[0].strip() for li in doc.get_element_by_id("findings").iter("li")} \
        <= {"of 2", "of 1"}  # each finding names the trace it is about
    blocks = [h.text_content() for h in doc.iter("h3")]
    assert blocks[:2] == ["Roofline (compute- or memory-bound ops): trajectory",
                          "Runtime overhead (host dispatch and launch against GPU time): trajectory"]


def test_seed_commands_on_the_committed_trace(cli: Any, tmp_path: Path) -> None:
    """Each command prints its report, its JSON and its plots on a trace with every event class."""
    expected_plots = {"overhead": ["overhead.png", "overhead.svg"], "breakdown": ["breakdown.png", "breakdown.svg"],
                      "memory": ["memory.png", "memory.svg"]}
    for command, plots in expected_plots.items():
        out = tmp_path / command
        text = cli(command, ALL_CLASSES, "-o", out)
        assert text.exit_code == 0, text.stderr
        assert sorted(p.name for p in out.iterdir()) == plots and "plots: " in text.stdout
        as_json = cli(command, ALL_CLASSES, "--format", "json")
        assert as_json.exit_code == 0 and isinstance(json.loads(as_json.stdout), dict)
    plan = cli("parallelism", ALL_CLASSES, "-o", tmp_path / "par", "--format", "json")
    assert plan.exit_code == 0, plan.stderr
    assert json.loads(plan.stdout)["result"]["ops"]
    assert {"plan.json", "parallelism.svg", "predicted", "views"} <= {p.name for p in (tmp_path / "par").iterdir()}


def test_seed_commands_fail_in_one_line(cli: Any, tmp_path: Path) -> None:
    trace = _cpu_only(tmp_path / "cpu")
    for command in ("overhead", "breakdown"):
        result = cli(command, trace)
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and str(trace) in result.stderr
    missing = cli("memory", tmp_path / "absent")
    assert missing.exit_code != 0 and "Traceback" not in missing.stderr and str(tmp_path / "absent") in missing.stderr


def test_overhead_trajectory_from_the_cli(cli: Any, tmp_path: Path) -> None:
    result = cli("overhead", ALL_CLASSES, ALL_CLASSES, "--labels", "16,8", "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert [p["label"] for p in data["trajectory"]["result"]["points"]] == ["8", "16"]
    assert len(data["runs"]) == 2


def test_headline_is_the_first_finding() -> None:
    from tc_analyses.analyses.result import Finding, Result
    from tc_analyses.export.sections import SeedSection
    from tc_analyses.registry import entry

    memory = entry("memory")
    found = Result("memory", "t", None, (Finding("peak", 0, "first thing.\n More detail"), Finding("churn", 0, "x")))
    assert SeedSection(memory, found, "text").headline() == "first thing. More detail"
    assert SeedSection(memory, Result("memory", "t", None, ()), "text").headline() == "no findings"
    assert SeedSection(memory, None, "not available: t: why\n").headline() == "not available: t: why"


def test_the_same_result_has_the_same_json_in_every_command(cli: Any) -> None:
    """`dfcompass KEY --format json` and the KEY section of `analyze --format json` are one document."""
    for trace, keys in ((ALL_CLASSES, sorted(set(KEYS) - SOURCE_SPECIFIC)), (TF_CNN, sorted(SOURCE_SPECIFIC))):
        _same_json_alone_and_in_analyze(cli, trace, keys)


def _same_json_alone_and_in_analyze(cli: Any, trace: Path, keys: list[str]) -> None:
    sections = json.loads(cli("analyze", trace, "--format", "json").stdout)["sections"]
    for key in keys:
        alone = json.loads(cli(key, trace, "--format", "json").stdout)
        assert {"available": True, **alone} == sections[key], key
        assert alone["analysis"] == key and all(set(f) == {"kind", "impact_ns", "text"} for f in alone["findings"])


def test_analyze_text_is_a_summary_then_one_line_per_section(cli: Any) -> None:
    """A line per section that applies; those that do not, one line together, each with why."""
    short = cli("analyze", ALL_CLASSES).stdout
    document = json.loads(cli("analyze", ALL_CLASSES, "--format", "json").stdout)["sections"]
    titles = [entry(key).title for key in KEYS]
    applies = [entry(key).title for key in KEYS if document[key]["available"]]
    assert applies and "== " not in short and all(f"  {title}: " in short for title in applies)
    missing = [key for key in KEYS if not document[key]["available"]]
    [line] = [line for line in short.splitlines() if line.startswith("  not available on this trace: ")] or [""]
    assert all(f"{key} (" in line or f"{key}, " in line for key in missing) if missing else not line
    full = cli("analyze", ALL_CLASSES, "--details").stdout
    assert all(f"== {title} ==" in full for title in titles) and len(full.splitlines()) > len(short.splitlines())
    assert short.splitlines()[0] == full.splitlines()[0]  # the same summary first
