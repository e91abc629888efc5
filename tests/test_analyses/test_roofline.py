"""Roofline analysis, its CLI and its plot, checked against numbers computed by hand."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.registry import TRACE_KEYS, entry
from lxml import etree

from tc_analyses.analyses.roofline import NO_SHAPES, Peaks, measure_peaks, roofline
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.export.roofline_report import write_roofline_plot
from tc_analyses.model.graph import build_graph
from tc_analyses.perf.devices import spec
from tc_analyses.reader import read_trace
from tracer.builder import TraceBuilder

M, K_, N = 64, 128, 32
MM_NS = 1_000
MM_FLOPS = 2 * M * K_ * N  # one multiply-add per (i, k, j)
MM_BYTES = (M * K_ + K_ * N + M * N) * 4  # float32: both inputs read, the output written


def _trace(path: Path, *, with_args: bool = True) -> Path:
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu = b.device("cpu", 10)
        b.add("thread_info", "1", 10, 1, 1, "main")
        b.add("node_begin", "1", 100, 0, "aten::mm", "layer.mm", cpu, 1, 0)
        if with_args:
            b.add("node_args", "1", 101, 0, f"[[{M}, {K_}], [{K_}, {N}]]", "float32,float32")
        b.add("node_end", "1", 100 + MM_NS, 0, cpu, 1)
        b.add("node_begin", "1", 2_000, 1, "aten::relu", "layer.relu", cpu, 1, 0)
        if with_args:
            b.add("node_args", "1", 2_001, 1, f"[[{M}, {N}]]", "float32")
        b.add("node_end", "1", 2_500, 1, cpu, 1)
    return path


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return _trace(tmp_path / "t")


def _mm(result: Any) -> Any:
    return next(p for p in result.points if p.op == "aten::mm")


def test_mm_point_matches_hand_computed_values(trace: Path) -> None:
    h100 = spec("H100")
    result = roofline(build_graph(read_trace(trace)), h100)
    p = _mm(result)
    intensity = MM_FLOPS / MM_BYTES  # 524288 / 57344 = 9.142857...
    assert (p.flops, p.bytes) == (MM_FLOPS, MM_BYTES)
    assert p.intensity == pytest.approx(intensity)
    assert p.achieved_flops == pytest.approx(MM_FLOPS / (MM_NS * 1e-9))
    roof = min(67e12, intensity * 3350e9)  # H100 fp32 peak, HBM3 bandwidth
    assert p.roof_flops == pytest.approx(roof)
    assert p.efficiency == pytest.approx((MM_FLOPS / (MM_NS * 1e-9)) / roof)
    assert result.ridge_point == pytest.approx(67e12 / 3350e9) and p.bound == "memory"  # 9.14 < 20
    op = next(o for o in result.ops if o.op == "aten::mm")
    assert (op.count, op.total_ns, op.flops, op.bytes) == (1, MM_NS, MM_FLOPS, MM_BYTES)
    assert result.memory_bound_share + result.compute_bound_share == pytest.approx(1.0)


def test_bound_flips_at_the_ridge_point(trace: Path) -> None:
    graph = build_graph(read_trace(trace))
    intensity = MM_FLOPS / MM_BYTES
    bandwidth = 100e9
    below = Peaks("x", "test", intensity * 1.01 * bandwidth, None, bandwidth)  # ridge just above I
    above = Peaks("x", "test", intensity * 0.99 * bandwidth, None, bandwidth)  # ridge just below I
    at = Peaks("x", "test", intensity * bandwidth, None, bandwidth)
    assert _mm(roofline(graph, below)).bound == "memory"
    assert _mm(roofline(graph, above)).bound == "compute"
    assert _mm(roofline(graph, at)).bound == "compute"
    assert _mm(roofline(graph, above)).roof_flops == pytest.approx(intensity * 0.99 * bandwidth)


def test_time_shares_and_low_efficiency_finding(trace: Path) -> None:
    result = roofline(build_graph(read_trace(trace)), spec("H100"))
    total = sum(p.total_ns for p in result.points)
    memory = sum(p.total_ns for p in result.points if p.bound == "memory")
    assert result.memory_bound_share == pytest.approx(memory / total)
    assert any(f.text.startswith("aten::mm:") and "of its roof" in f.text for f in result.findings)


def test_no_node_args_is_an_error(tmp_path: Path, cli: Callable[..., Any]) -> None:
    bare = _trace(tmp_path / "bare", with_args=False)
    with pytest.raises(AnalysisUnavailable, match="no input shapes"):
        roofline(build_graph(read_trace(bare)), spec("H100"))
    r = cli("roofline", bare)
    assert r.exit_code == 1
    assert r.stderr.strip().count("\n") == 0 and NO_SHAPES in r.stderr
    # the registry entry says so from the trace's counts: the graph (seconds on 1M events) is not built
    from tc_analyses.analyses import roofline as entry
    from tc_analyses.inputs import TraceInputs

    inputs = TraceInputs(bare)
    with pytest.raises(AnalysisUnavailable, match="no input shapes"):
        entry.run(inputs, {"measure_peaks": False, "device": "H100"})
    assert "graph" not in vars(inputs)  # the cached property was never computed


def test_cli_text_and_json(trace: Path, cli: Callable[..., Any]) -> None:
    r = cli("roofline", trace, "--device", "H100")
    assert r.exit_code == 0, r.stderr
    assert "aten::mm" in r.stdout and "memory" in r.stdout and "findings:" in r.stdout
    r = cli("roofline", trace, "--device", "H100", "--format", "json")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    mm = next(o for o in data["result"]["ops"] if o["op"] == "aten::mm")
    assert mm["flops"] == MM_FLOPS and mm["bytes"] == MM_BYTES and mm["bound"] == "memory"
    assert data["result"]["peaks"]["model"] == "H100"
    bad = cli("roofline", trace, "--device", "Z80")
    assert bad.exit_code == 2 and "unknown device model" in bad.stderr


@pytest.mark.slow
def test_plot_files_are_written_and_deterministic(trace: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    r = cli("roofline", trace, "--device", "A100", "-o", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    png, svg = tmp_path / "out" / "roofline.png", tmp_path / "out" / "roofline.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert etree.parse(str(svg)).getroot().tag.endswith("svg")
    result = roofline(build_graph(read_trace(trace)), spec("A100"))
    write_roofline_plot(result, tmp_path / "again")
    assert (tmp_path / "again" / "roofline.png").read_bytes() == png.read_bytes()
    assert (tmp_path / "again" / "roofline.svg").read_bytes() == svg.read_bytes()


def test_measured_peaks_are_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "dfcompass" / "peaks.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"fp32_flops": 1e11, "bandwidth": 1e10}))
    peaks = measure_peaks()
    assert (peaks.fp32_flops, peaks.bandwidth, peaks.source) == (1e11, 1e10, "measured")
    assert peaks.ridge() == pytest.approx(10.0)


def test_measure_peaks_writes_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    peaks = measure_peaks(refresh=True)
    assert peaks.fp32_flops > 0 and peaks.bandwidth > 0
    cached = json.loads((tmp_path / "cache" / "dfcompass" / "peaks.json").read_text())
    assert cached == {"fp32_flops": peaks.fp32_flops, "bandwidth": peaks.bandwidth}


@pytest.mark.slow
def test_html_report_is_one_static_page(cli: Any, tmp_path: Path) -> None:
    from lxml import html

    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
    out = tmp_path / "report.html"
    result = cli("report", str(trace), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    page = out.read_text()
    doc = html.fromstring(page)
    headings = [h.text_content() for h in doc.iter("h3")]
    # every analysis feeds on this trace and has its plot inline, but eager-overhead: it reads what
    # only the TensorFlow source records, and is named with why in the one block at the end
    sections = [entry(key).title for key in TRACE_KEYS if key != "eager-overhead"]
    assert headings == (["Trace", "Headless analyses (busy, top nodes, memory)", "Step timeline"] + sections
                        + ["Not available for this trace"])
    assert "eager-overhead (" in doc.get_element_by_id("t0-missing").getnext().text_content()
    assert len(doc.findall(".//svg")) == len(sections)
    # no external resources: nothing loaded from elsewhere (plotly.js is in the page's own <script>,
    # the findings' plots are data: URIs)
    assert all(src.startswith("data:image/png;base64,") for src in doc.xpath("//*/@src"))
    assert not doc.xpath("//link") and not doc.xpath("//a[starts-with(@href, 'http')]")
    assert len(doc.find_class("plotly-graph-div")) == 3  # the step timeline, the roofline, the stream plan
    # the first screen: the findings of every analysis, the most time at stake first, each linking
    # to its analysis's block on the page
    first = doc.get_element_by_id("findings")
    assert first is doc.find(".//section") and first.getprevious().tag == "h1"
    items = first.findall(".//li")
    assert 3 <= len(items) <= 15
    stakes = [float(li.find("span").text.split()[0].replace(",", "")) if "at stake" in li.find("span").text else 0.0
              for li in items]
    assert stakes == sorted(stakes, reverse=True) and stakes[0] > 0
    seen = set()
    for li in items:
        target = li.find("a[@class='analysis']").get("href").removeprefix("#")
        assert doc.get_element_by_id(target).tag == "h3"
        assert li.find("span[@class='sure']").text in ("(measured)", "(modelled)")
        # the first finding of an analysis that has a plot shows it, small, linking to its block
        evidence = li.find("a/img[@class='evidence']")
        assert (evidence is not None) == (target not in seen and _has_static_plot(doc.get_element_by_id(target))), target
        if evidence is not None:
            assert evidence.getparent().get("href") == f"#{target}"
            assert base64.b64decode(evidence.get("src").split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
        seen.add(target)


def _has_static_plot(heading: Any) -> bool:
    """Whether the block under this heading holds an inline SVG plot."""
    for sibling in heading.itersiblings():
        if sibling.tag in ("h2", "h3"):
            return False
        if sibling.tag == "figure" and sibling.find(".//svg") is not None:
            return True
    return False


def test_html_report_escapes_every_text() -> None:
    from tc_analyses.export.html_report import Block, Lead, Section, render

    lead = Lead("<script>x</script>", "an <i>", "t\"<", 5_000_000, "measured", 'a"<b')
    page = render("t <&>", [Section("trace <b>", [Block("op <i>", text="<script>alert(1)</script> & \"'",
                                                        anchor='a"<b')])], [lead])
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp;" in page and "trace &lt;b&gt;" in page
    assert 'href="#a&#34;&lt;b"' in page and 'id="a&#34;&lt;b"' in page and "t&#34;&lt;" in page


@pytest.mark.parametrize(("env", "threads"), [
    ({"torch_num_threads": "4", "cores": "16"}, 4),
    ({"tf_intra_op_threads": "3", "cores": "16"}, 3),
    ({"tf_intra_op_threads": "0", "cores": "16"}, 16),  # TensorFlow's default: one thread per core
    ({"tf_intra_op_threads": "0"}, None),
    ({"cores": "8"}, None),
])
def test_the_thread_count_the_run_used_is_read_for_either_framework(env: dict[str, str], threads: int | None) -> None:
    from types import SimpleNamespace

    from tc_analyses.analyses.roofline import recorded_threads

    assert recorded_threads(SimpleNamespace(metadata=SimpleNamespace(env=env))) == threads  # type: ignore[arg-type]
