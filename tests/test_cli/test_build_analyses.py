"""`dfcompass build-analyses`: tailoring, --validate with and without a schema, one-line errors."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
from lxml import etree

from tests.test_export.conftest import ALL_CLASSES, BUNDLE, make_jar
from tracer.builder import TraceBuilder

ENV = "DFCOMPASS_TRACECOMPASS_XSD"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No schema from the caller's environment; a private cache for schemas taken from jars."""
    monkeypatch.setenv(ENV, "")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def _clean(result: Any) -> None:
    assert "Traceback" not in result.stdout + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _error_line(result: Any) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dfcompass: error: ")
    return lines[0]


def test_validate_with_the_shared_xsd(cli: Callable[..., Any], tmp_path: Path, tc_xsd: Path) -> None:
    result = cli("build-analyses", ALL_CLASSES, "-o", tmp_path / "out", "--validate", "--xsd", tc_xsd)
    _clean(result)
    assert result.exit_code == 0, result.stderr
    assert "validated 7 files" in result.stdout


def test_validate_reads_the_environment(cli: Callable[..., Any], tmp_path: Path, tc_xsd: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tc_xsd.parent))
    result = cli("build-analyses", "-o", tmp_path / "out", "--validate")
    _clean(result)
    assert result.exit_code == 0 and "validated 7 files" in result.stdout


def test_validate_without_a_schema_names_the_option(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("build-analyses", ALL_CLASSES, "-o", tmp_path / "out", "--validate")
    _clean(result)
    assert result.exit_code == 1
    assert "--xsd" in _error_line(result)
    assert not (tmp_path / "out").exists()  # reported before anything is written


def test_validate_with_a_trace_compass_installation(cli: Callable[..., Any], tmp_path: Path, tc_xsd: Path) -> None:
    install = tmp_path / "trace-compass"
    make_jar(install / "plugins" / f"{BUNDLE}_10.1.0.202409121305.jar", tc_xsd.parent)
    (install / "tracecompass").write_bytes(b"#!/bin/sh\n")
    result = cli("build-analyses", ALL_CLASSES, "-o", tmp_path / "out", "--validate", "--xsd", install)
    _clean(result)
    assert result.exit_code == 0, result.stderr
    assert "validated 7 files" in result.stdout


def test_validate_reports_problems_one_per_line(cli: Callable[..., Any], tmp_path: Path, tc_xsd: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A template bug would surface as FILE:LINE lines and exit 1: simulate one."""
    from tc_analyses.export.tracecompass import render

    original = render.render_xml

    def broken(facts: Any = None) -> dict[str, bytes]:
        files = original(facts)
        files["gpu.xml"] = files["gpu.xml"].replace(b'"long" value="1" increment', b'"int" value="1" increment', 1)
        return files

    monkeypatch.setattr(render, "render_xml", broken)
    result = cli("build-analyses", "-o", tmp_path / "out", "--validate", "--xsd", tc_xsd)
    _clean(result)
    assert result.exit_code == 1
    problems = [line for line in result.stderr.splitlines() if not line.startswith("dfcompass: error:")]
    assert problems and all(line.startswith(f"dfcompass: {tmp_path / 'out' / 'xml' / 'gpu.xml'}:") for line in problems)
    assert "problem(s) in the generated analyses" in result.stderr


def test_a_bad_xsd_path_is_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("build-analyses", "-o", tmp_path / "out", "--validate", "--xsd", tmp_path / "nowhere")
    _clean(result)
    assert result.exit_code == 2 and "nowhere" in _error_line(result)
    (tmp_path / "empty").mkdir()
    result = cli("build-analyses", "-o", tmp_path / "out", "--validate", "--xsd", tmp_path / "empty")
    _clean(result)
    assert result.exit_code == 1 and "--xsd PATH" in _error_line(result)


def test_a_missing_trace_is_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("build-analyses", tmp_path / "no-such-trace", "-o", tmp_path / "out")
    _clean(result)
    assert result.exit_code == 1
    assert "no-such-trace" in _error_line(result)


def test_without_a_trace_every_analysis_is_built(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("build-analyses", "-o", tmp_path / "out")
    _clean(result)
    assert result.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "out" / "xml").iterdir()) == [
        "api.xml", "dataflow.xml", "experiment.xml", "gpu.xml", "latency.xml", "memory.xml", "ranks.xml"]
    assert (tmp_path / "out" / "README.md").is_file()
    assert len(list((tmp_path / "out" / "plugin").glob("*.jar"))) == 1


def test_a_cpu_only_trace_gets_no_gpu_or_api_analyses(cli: Callable[..., Any], tmp_path: Path) -> None:
    trace = tmp_path / "cpu-trace"
    with TraceBuilder(trace, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        b.add("thread_info", "1", 10, 1, 1, "main")
        b.add("node_begin", "1", 100, 0, "relu", "layer.relu", cpu, 1, 0)
        b.add("node_end", "1", 200, 0, cpu, 1)
    result = cli("build-analyses", trace, "-o", tmp_path / "out")
    _clean(result)
    assert result.exit_code == 0
    names = sorted(p.name for p in (tmp_path / "out" / "xml").iterdir())
    assert names == ["dataflow.xml", "experiment.xml", "latency.xml"]
    latency = etree.parse(str(tmp_path / "out" / "xml" / "latency.xml")).getroot()
    assert [p.get("id") for p in latency.iter("pattern")] == ["org.dfcompass.latency.node"]


def test_the_all_classes_trace_gets_per_device_views(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("build-analyses", ALL_CLASSES, "-o", tmp_path / "out")
    _clean(result)
    assert result.exit_code == 0
    xml = tmp_path / "out" / "xml"
    assert sorted(p.name for p in xml.iterdir()) == ["api.xml", "dataflow.xml", "experiment.xml", "gpu.xml",
                                                      "latency.xml", "memory.xml", "ranks.xml"]

    def views(name: str) -> dict[str, tuple[str, list[str]]]:
        root = etree.parse(str(xml / name)).getroot()
        return {v.get("id"): (v.find("head/label").get("value"), [e.get("path") for e in v.findall("entry")])
                for v in root if v.tag in ("timeGraphView", "xyView")}

    gpu = views("gpu.xml")
    assert gpu["org.dfcompass.gpu.busy.dev1"] == ("GPU busy: cuda:0", ["GPU/1"])
    assert gpu["org.dfcompass.gpu.queues"][1] == ["GPU/1"]  # the CPU is no GPU queue
    memory = views("memory.xml")
    # only the CPU allocates in this trace: no empty chart for cuda:0
    assert memory == {"org.dfcompass.memory.in_use.dev0": ("Memory in use: cpu", ["Memory/0"])}
    assert views("dataflow.xml")["org.dfcompass.dataflow.nodes"][1] == ["Steps/*", "Devices/0", "Devices/1"]
    latency = etree.parse(str(xml / "latency.xml")).getroot()
    assert [p.get("id") for p in latency.iter("pattern")] == [
        "org.dfcompass.latency.node", "org.dfcompass.latency.kernel", "org.dfcompass.latency.launch",
        "org.dfcompass.latency.transfer"]
    assert "(all-classes)" in latency.find("pattern/head/label").get("value")
