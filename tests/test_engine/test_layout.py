"""engine.layout is the one place the generated analyses' ids and attribute paths are named:
renaming any of them there renames it in the XML and in what the summary reads back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tc_analyses.analyses.summary import Summary, summarize
from tc_analyses.engine import build, layout
from tc_analyses.export.tracecompass import render_xml
from tc_analyses.export.tracecompass.facts import trace_facts
from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
SEGMENTS = [key for key in layout.names() if not key.endswith("_ID") and key != "ID_PREFIX"]


def _summary(tmp: Path) -> tuple[dict[str, bytes], Summary]:
    trace = read_trace(TRACE)
    files = render_xml(trace_facts(trace))
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return files, summarize(build(trace, sorted(tmp.glob("*.xml"))))


def _figures(summary: Summary) -> tuple[object, ...]:
    return summary.busy, summary.top_nodes, summary.memory_peak, summary.span_ns, summary.events


def test_renaming_every_id_and_path_in_layout_keeps_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before_xml, before = _summary(tmp_path / "before")
    assert {b.device: b.percent for b in before.busy if not b.queue} == {"cpu": 7.499, "cuda:0": 12.655}
    assert [b.queue for b in before.busy if b.queue] == ["7"] and before.memory_peak == {"cpu": 12288}
    assert before.top_nodes
    for key, value in layout.names().items():
        monkeypatch.setattr(layout, key, f"{value}.v2" if key.endswith("_ID") else f"{value}V2")
    after_xml, after = _summary(tmp_path / "after")
    assert _figures(after) == _figures(before)
    assert after.analyses == [f"{a}.v2" for a in before.analyses]
    renamed = b"\n".join(after_xml.values())
    for key in SEGMENTS:  # nothing in the XML still names the old segment
        old = getattr(layout, key)[: -len("V2")]
        assert f'type="constant" value="{old}"'.encode() not in renamed, key
        assert f'type="constant" value="{old}V2"'.encode() in renamed or key in ("IDLE", "LANE"), key  # values, a prefix
    paths = re.findall(rb'<entry path="([^"]*)"', renamed)
    assert b"GPUV2/1" in paths and b"QueuesV2/*" in paths
    assert all(seg == b"*" or seg.isdigit() or seg.endswith(b"V2") for p in paths for seg in p.split(b"/")), paths
    assert b'value="idleV2"' in after_xml["gpu.xml"] and b'value="idle"' not in after_xml["gpu.xml"]
    assert set(after_xml) == set(before_xml)


def test_one_rename_reaches_template_and_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The failure this module prevents: a path renamed on one side only gave 0% busy.
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    _, before = _summary(tmp_path / "before")
    monkeypatch.setattr(layout, "QUEUES", "Lanes")
    monkeypatch.setattr(layout, "DEVICES", "Units")
    monkeypatch.setattr(layout, "GPU_ID", "org.dfcompass.accelerators")
    files, after = _summary(tmp_path / "after")
    assert b'value="Lanes"' in files["gpu.xml"] and b"Queues" not in files["gpu.xml"]
    assert b'<entry path="Units/0">' in files["dataflow.xml"] and b"Devices" not in files["dataflow.xml"]
    assert b'<stateProvider id="org.dfcompass.accelerators"' in files["gpu.xml"]
    assert _figures(after) == _figures(before)
    assert all(b.percent > 0 for b in after.busy)


def test_names_are_the_layout_constants() -> None:
    names = layout.names()
    assert names["DEVICES"] == "Devices" and names["QUEUES"] == "Queues" and names["GPU_ID"] == "org.dfcompass.gpu"
    assert names["NODE_LATENCY_ID"] == "org.dfcompass.latency.node" and names["BYTES_IN_USE"] == "bytes_in_use"
    assert all(isinstance(v, str) for v in names.values())
