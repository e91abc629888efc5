"""engine.build runs the patterns on a thread beside the providers (more than one core): the same
state systems, segments, engines and first error as one after the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tc_analyses.engine import build
from tc_analyses.engine import run as engine_run
from tc_analyses.errors import DfcompassError
from tests.test_engine.test_engine_equivalence import generated_xml, snapshot

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<tmfxml>\n'
# A Long field, then an Integer constant, into one attribute: Trace Compass's type lock fails the analysis.
BAD_PROVIDER = HEAD + """<stateProvider id="bad.provider" version="1">
  <eventHandler eventName="dfc:node_begin"><stateChange><stateAttribute type="constant" value="x"/>
    <stateValue type="eventField" value="node_id"/></stateChange></eventHandler>
  <eventHandler eventName="dfc:node_end"><stateChange><stateAttribute type="constant" value="x"/>
    <stateValue type="int" value="1"/></stateChange></eventHandler>
</stateProvider>
</tmfxml>
"""
BAD_PATTERN = HEAD + """<pattern id="bad.pattern" version="1"><patternHandler>
  <action id="long"><stateChange><stateAttribute type="constant" value="y"/>
    <stateValue type="eventField" value="node_id"/></stateChange></action>
  <action id="int"><stateChange><stateAttribute type="constant" value="y"/>
    <stateValue type="int" value="1"/></stateChange></action>
  <fsm id="f" multiple="false"><state id="s">
    <transition event="dfc:node_begin" target="s" action="long"/>
    <transition event="dfc:node_end" target="s" action="int"/>
  </state></fsm>
</patternHandler></pattern>
</tmfxml>
"""


def _cores(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(engine_run.os, "cpu_count", lambda: count)


def test_beside_builds_what_one_after_the_other_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = generated_xml(TRACE, tmp_path)
    _cores(monkeypatch, 2)
    beside = build(TRACE, files)
    _cores(monkeypatch, 1)
    serial = build(TRACE, files)
    assert beside.segments and snapshot(beside) == snapshot(serial)
    assert list(beside.engines.items()) == list(serial.engines.items())  # the same order too
    assert list(beside.systems) == list(serial.systems)


@pytest.mark.parametrize("bad", [["provider", "pattern"], ["pattern"]])
def test_the_first_error_is_a_serial_runs(bad: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = generated_xml(TRACE, tmp_path)
    for name in bad:
        (tmp_path / f"bad-{name}.xml").write_text(BAD_PROVIDER if name == "provider" else BAD_PATTERN)
        files.append(tmp_path / f"bad-{name}.xml")
    messages = []
    for cores in (2, 1):
        _cores(monkeypatch, cores)
        with pytest.raises(DfcompassError) as caught:
            build(TRACE, files)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert f"bad.{bad[0]}" in messages[0] and "cannot take a int" in messages[0], messages[0]


def test_without_room_for_both_they_run_one_after_the_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = generated_xml(TRACE, tmp_path)
    _cores(monkeypatch, 2)
    started: list[int] = []

    class Spy(engine_run._Beside):
        def __init__(self, function: Any) -> None:
            started.append(1)
            super().__init__(function)

    monkeypatch.setattr(engine_run, "_Beside", Spy)
    for free_bytes, beside in ((1, False), (1 << 40, True)):
        monkeypatch.setattr(engine_run.os, "sysconf", lambda name, value=free_bytes: value)
        started.clear()
        build(TRACE, files)
        assert started == ([1] if beside else [])
