"""model.py: what gets generated for which trace, and trace text made safe for XML."""

from __future__ import annotations

import pytest

from tc_analyses.export.tracecompass.model import TraceFacts, build, comment_text, xml_text
from tc_analyses.model.activity import Device


@pytest.mark.parametrize("text, expected", [
    ("cuda:0", "cuda:0"),
    ("a\tb\nc\rd", "a b c d"),
    ("nul\x00 esc\x1b", "nul\ufffd esc\ufffd"),
    ("lone \ud800 surrogate", "lone \ufffd surrogate"),
    ("<&\"'> \u2603 \U0001F600", "<&\"'> \u2603 \U0001F600"),  # escaping is the template's job
])
def test_xml_text(text: str, expected: str) -> None:
    assert xml_text(text) == expected


@pytest.mark.parametrize("text", ["a--b", "---", "end-", "-->", "<!-- x -->"])
def test_comment_text_can_sit_in_a_comment(text: str) -> None:
    safe = comment_text(text)
    assert "--" not in safe and not safe.endswith("-")


def test_everything_without_a_trace() -> None:
    meta, analyses = build(None)
    assert [a.name for a in analyses] == ["dataflow", "gpu", "api", "memory", "experiment", "ranks", "latency"]
    assert all(d.path == "*" for a in analyses for d in a.devices)
    assert meta.source == "" and meta.version == 1102


def test_a_trace_without_gpu_work_gets_no_gpu_analyses() -> None:
    facts = TraceFacts("t", frozenset({"node_begin", "node_end", "mem_alloc", "device_info"}), (Device(0, "cpu", "cpu"),))
    meta, analyses = build(facts)
    assert [a.name for a in analyses] == ["dataflow", "memory", "experiment", "latency"]
    assert [p.fsm for p in analyses[-1].patterns] == ["node"]
    assert [(d.path, d.title) for d in analyses[0].devices] == [("0", ": cpu")]
    assert meta.source == "t"


def test_gpu_views_list_only_gpus() -> None:
    classes = frozenset({"node_begin", "kernel_begin", "api_enter"})
    facts = TraceFacts("t", classes, (Device(0, "cpu", "cpu"), Device(1, "cuda:0", "cuda"),
                                      Device(2, "cuda:1 \x00", "cuda")))
    _, analyses = build(facts)
    gpu = next(a for a in analyses if a.name == "gpu")
    assert [(d.path, d.title, d.suffix) for d in gpu.devices] == [("1", ": cuda:0", ".dev1"),
                                                                   ("2", ": cuda:1 \ufffd", ".dev2")]
