"""docs/analyses/ describes every generated Trace Compass analysis, view and event.

The generated XML is the reference: the ids of its analyses and views, and the events its state
providers and patterns handle, are read from renders of the templates (the whole catalogue, and
one tailored to a committed trace, which adds the per-device view ids).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from lxml import etree

from tc_analyses.export.tracecompass import render_xml
from tc_analyses.export.tracecompass.facts import trace_facts
from tracer import schema

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "analyses"
TRACE = ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"
TABLE_HEADING = "## From event to view"
ANALYSIS_TAGS = ("stateProvider", "pattern")
VIEW_TAGS = ("timeGraphView", "xyView")
DEVICE_SUFFIX = re.compile(r"\.dev\d+$")  # tailored per-device views: documented as .dev<N>
CODE = re.compile(r"`([^`]+)`")


@cache
def _roots() -> tuple[etree._Element, ...]:
    renders = (render_xml(), render_xml(trace_facts(TRACE)))
    return tuple(etree.fromstring(data) for files in renders for data in files.values())


def _generated_ids() -> set[str]:
    return {DEVICE_SUFFIX.sub(".dev<N>", element.get("id"))
            for root in _roots() for element in root if element.tag in ANALYSIS_TAGS + VIEW_TAGS}


def _analysis_ids() -> set[str]:
    return {element.get("id") for root in _roots() for element in root if element.tag in ANALYSIS_TAGS}


def _handled_events() -> dict[str, set[str]]:
    """Event name -> ids of the state providers and patterns whose XML reacts to it."""
    handled: dict[str, set[str]] = {}
    for root in _roots():
        for analysis in (e for e in root if e.tag in ANALYSIS_TAGS):
            names = [h.get("eventName") for h in analysis.iter("eventHandler")]
            names += [t.get("event") for t in analysis.iter("transition", "precondition") if t.get("event")]
            for name in names:
                handled.setdefault(name, set()).add(analysis.get("id"))
    return handled


def _docs_text() -> str:
    return "\n".join(path.read_text() for path in sorted(DOCS.glob("*.md")))


def _event_table() -> dict[str, tuple[str, str]]:
    """Rows of README.md's event-to-view table: event -> (consumed-by cell, what-for cell)."""
    text = (DOCS / "README.md").read_text()
    assert TABLE_HEADING in text, f"docs/analyses/README.md has no '{TABLE_HEADING}' section"
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `dfc:"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert len(cells) == 3, f"event table row should have 3 cells: {line}"
        event = cells[0].strip("`")
        assert event not in rows, f"{event} has two rows in the event table"
        rows[event] = (cells[1], cells[2])
    return rows


def test_the_renders_hold_analyses_views_and_handlers() -> None:
    assert {"org.dfcompass.dataflow", "org.dfcompass.latency.node"} <= _analysis_ids()
    assert any(i.endswith(".dev<N>") for i in _generated_ids()), "the tailored render has no per-device view"
    from tc_analyses.export.tracecompass.model import LTTNG_SCHED_SWITCH

    # the experiment analysis also reads the LTTng kernel trace beside ours
    external = set(_handled_events()) - set(schema.BY_NAME)
    assert external <= {LTTNG_SCHED_SWITCH}, f"the XML handles events the catalogue lacks: {external}"


def test_every_analysis_and_view_id_is_documented() -> None:
    text = _docs_text()
    missing = sorted(i for i in _generated_ids() if f"`{i}`" not in text)
    assert not missing, f"docs/analyses/ never mentions (in backquotes) these generated ids: {missing}"


def test_every_catalogue_event_has_a_row_in_the_event_table() -> None:
    rows = _event_table()
    missing = [cls.name for cls in schema.CATALOGUE if cls.name not in rows]
    assert not missing, f"docs/analyses/README.md's event table lacks {missing}"
    stale = sorted(set(rows) - set(schema.BY_NAME))
    assert not stale, f"docs/analyses/README.md's event table has events the catalogue lacks: {stale}"


def test_handled_events_are_not_listed_as_feeding_nothing() -> None:
    rows = _event_table()
    for event, analyses in sorted(_handled_events().items()):
        if event not in schema.BY_NAME:  # another tracer's event (the experiment's sched_switch)
            assert f"`{event}`" in (DOCS / "README.md").read_text(), f"external event {event} is not documented"
            continue
        consumed = rows[event][0]
        assert not consumed.lower().startswith("none"), f"{event} is handled by {sorted(analyses)} but listed as none"
        for analysis in sorted(analyses):
            assert f"`{analysis}`" in consumed, f"{event} feeds {analysis}, which its table row does not name"


def test_the_event_table_names_no_analysis_that_ignores_the_event() -> None:
    handled = _handled_events()
    known = _analysis_ids()
    for event, (consumed, _) in sorted(_event_table().items()):
        named = {name for name in CODE.findall(consumed) if name in known}
        wrong = sorted(named - handled.get(event, set()))
        assert not wrong, f"the event table says {event} feeds {wrong}, whose XML does not handle it"
        if consumed.lower().startswith("none"):
            assert event not in handled, f"{event} is listed as none but {sorted(handled[event])} handle it"
