"""lint.py: each rule on a fixture with one defect, and no false alarm on clean files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tc_analyses.export.tracecompass.lint import lint
from tests.helpers import REPO_ROOT
from tests.test_export.conftest import ALL_CLASSES, build

FIXTURES = sorted((REPO_ROOT / "tests" / "data" / "xml" / "lint").glob("*.xml"))


def test_every_rule_has_a_fixture() -> None:
    assert {p.stem for p in FIXTURES} >= {
        "unknown_location", "unknown_defined_value", "unknown_mapping_group", "int_long_mix",
        "int_increment_on_field", "int_without_defined_value", "regex_in_view_path", "unknown_fsm_target",
        "unknown_fsm_test", "view_unknown_analysis", "bad_int_constant"}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_gives_exactly_its_problem(path: Path) -> None:
    line, text = re.search(r"lint expects line (\d+): (.*?) -->", path.read_text()).groups()  # type: ignore[union-attr]
    problems = lint(path)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}:{line}: ")
    assert text in problems[0]
    assert "\n" not in problems[0]


@pytest.mark.parametrize("trace", [None, ALL_CLASSES], ids=["full", "all-classes"])
def test_generated_files_are_clean(trace: Path | None, tmp_path: Path) -> None:
    build(tmp_path / "out", trace)
    for path in sorted((tmp_path / "out" / "xml").glob("*.xml")):
        assert lint(path) == []


def _lint_text(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "a.xml"
    path.write_text(f"<tmfxml>\n{body}\n</tmfxml>\n", encoding="utf-8")
    return [p.split(": ", 1)[1] for p in lint(path)]


def _provider(*changes: str, head: str = "") -> str:
    body = "\n".join(f"<stateChange>{c}</stateChange>" for c in changes)
    return f'<stateProvider id="p" version="1">{head}<eventHandler eventName="e">{body}</eventHandler></stateProvider>'


def test_cpu_field_is_an_integer_like_int_constants(tmp_path: Path) -> None:
    """Trace Compass reads `cpu` from the CPU aspect, an Integer: int constants beside it are fine."""
    a = '<stateAttribute type="constant" value="CPU"/>'
    assert _lint_text(tmp_path, _provider(a + '<stateValue type="eventField" value="cpu"/>',
                                          a + '<stateValue type="int" value="-1"/>')) == []
    problems = _lint_text(tmp_path, _provider(a + '<stateValue type="eventField" value="cpu"/>',
                                              a + '<stateValue type="long" value="-1"/>'))
    assert len(problems) == 1 and 'attribute "CPU"' in problems[0]


def test_forced_type_decides_the_type(tmp_path: Path) -> None:
    a = '<stateAttribute type="constant" value="X"/>'
    assert _lint_text(tmp_path, _provider(a + '<stateValue type="eventField" value="tid" forcedType="int"/>',
                                          a + '<stateValue type="int" value="0"/>')) == []
    assert _lint_text(tmp_path, _provider(a + '<stateValue type="int" value="1" forcedType="long"/>',
                                          a + '<stateValue type="long" value="0"/>')) == []


def test_conditions_and_other_attributes_are_not_writes(tmp_path: Path) -> None:
    a = '<stateAttribute type="constant" value="X"/>'
    cond = (f'<if><condition>{a}<stateValue type="int" value="0"/></condition></if>'
            f'<then>{a}<stateValue type="long" value="1"/></then>'
            f'<else><stateAttribute type="constant" value="Y"/><stateValue type="int" value="1"/></else>')
    assert _lint_text(tmp_path, _provider(cond)) == []


def test_then_and_else_writes_are_compared(tmp_path: Path) -> None:
    a = '<stateAttribute type="constant" value="X"/>'
    cond = (f'<if><condition>{a}<stateValue type="null"/></condition></if>'
            f'<then>{a}<stateValue type="long" value="1"/></then><else>{a}<stateValue type="int" value="1"/></else>')
    problems = _lint_text(tmp_path, _provider(cond))
    assert len(problems) == 1 and 'attribute "X"' in problems[0]


def test_stack_push_writes_below_the_stack_attribute(tmp_path: Path) -> None:
    a = '<stateAttribute type="constant" value="S"/>'
    assert _lint_text(tmp_path, _provider(a + '<stateValue type="eventField" value="f" stack="push"/>',
                                          a + '<stateValue type="null" stack="pop"/>')) == []
    problems = _lint_text(tmp_path, _provider(a + '<stateValue type="eventField" value="f" stack="push"/>',
                                              a + '<stateValue type="long" value="3"/>'))
    assert len(problems) == 1 and "stack depth" in problems[0]


def test_defined_values_resolve_in_paths_and_numbers(tmp_path: Path) -> None:
    head = '<definedValue name="ROOT" value="Root"/><definedValue name="ONE" value="1"/>'
    change = '<stateAttribute type="constant" value="$ROOT"/><stateValue type="int" value="$ONE"/>'
    assert _lint_text(tmp_path, _provider(change, head=head)) == []
    bad = '<stateAttribute type="constant" value="$ROOT"/><stateValue type="int" value="$ROOT"/>'
    problems = _lint_text(tmp_path, _provider(bad, head=head))
    assert len(problems) == 1 and 'int value "$ROOT" (= "Root") is not a Java int' in problems[0]


def test_int_views_need_a_defined_value_per_int(tmp_path: Path) -> None:
    view = ('<timeGraphView id="v"><head><analysis id="p"/></head>{defs}'
            '<entry path="Threads/*"><display type="constant" value="Status"/></entry></timeGraphView>')
    change = ('<stateAttribute type="constant" value="Threads"/><stateAttribute type="eventField" value="tid"/>'
              '<stateAttribute type="constant" value="Status"/><stateValue type="int" value="{v}"/>')
    body = view.format(defs='<definedValue name="A" value="1" color="#000000"/>') + _provider(change.format(v=1))
    assert _lint_text(tmp_path, body) == []
    problems = _lint_text(tmp_path, view.format(defs="") + _provider(change.format(v=1), change.format(v=2)))
    assert len(problems) == 2 and all("Threads/*/Status" in p for p in problems)
    negative = view.format(defs='<definedValue name="A" value="-1" color="#000000"/>') + _provider(
        change.format(v=-1))
    assert len(_lint_text(tmp_path, negative)) == 1  # Trace Compass ignores negative definedValues
    strings = view.format(defs="") + _provider(change.replace('type="int" value="{v}"', 'type="string" value="run"'))
    assert _lint_text(tmp_path, strings) == []
    xy = view.replace("timeGraphView", "xyView").format(defs="") + _provider(change.format(v=2))
    assert _lint_text(tmp_path, xy) == []  # XY views plot numbers: nothing to declare


def test_forced_int_values_need_some_numeric_defined_value(tmp_path: Path) -> None:
    view = ('<timeGraphView id="v">{defs}<entry path="Q"><display type="self"/></entry></timeGraphView>')
    change = '<stateAttribute type="constant" value="Q"/><stateValue type="eventField" value="s" forcedType="int"/>'
    assert len(_lint_text(tmp_path, view.format(defs="") + _provider(change))) == 1
    defs = '<definedValue name="A" value="0" color="#000000"/>'
    assert _lint_text(tmp_path, view.format(defs=defs) + _provider(change)) == []


def test_view_paths_allow_wildcards_and_placeholders(tmp_path: Path) -> None:
    view = ('<timeGraphView id="v"><head><analysis id="p"/></head>'
            '<entry path="CPUs/*"><entry path="$1/*"><display type="self"/></entry></entry>'
            '<entry path="Threads/thread-1*"><display type="self"/></entry></timeGraphView>')
    change = '<stateAttribute type="constant" value="CPUs"/><stateValue type="string" value="x"/>'
    assert _lint_text(tmp_path, view + _provider(change)) == []
    for segment in ("a.b", "x+", "[0]", "a|b", "^a", "a$", "back\\slash", "f(x)", "{1}", "a?"):
        bad = f'<xyView id="x"><entry path="Top/{segment}/*"><display type="self"/></entry></xyView>'
        problems = _lint_text(tmp_path, bad)
        assert len(problems) == 1 and f'path segment "{segment}"' in problems[0], segment


def test_views_alone_may_target_any_analysis(tmp_path: Path) -> None:
    view = '<xyView id="x"><head><analysis id="some.java.analysis"/></head><entry path="A"/></xyView>'
    assert _lint_text(tmp_path, view) == []


def test_pattern_references(tmp_path: Path) -> None:
    pattern = '''<pattern id="p" version="1"><patternHandler initial="main:missing_fsm">
        <action id="a1"><action id="a2"/><fsmScheduleAction id="nope"/></action>
        <fsm id="main" initial="s0">
            <precondition event="x" cond="no_test"/>
            <state id="s0"><onentry action="a1:gone"/><transition event="x" target="s1" action="a1"/></state>
            <state id="s1"><transition event="y"/></state>
            <final id="end"/>
        </fsm></patternHandler></pattern>'''
    problems = _lint_text(tmp_path, pattern)
    expected = ['unknown fsm "missing_fsm"', 'unknown action "a2"', 'unknown fsm "nope"', 'unknown test "no_test"',
                'unknown action "gone"', "transition without target"]
    assert len(problems) == len(expected), problems
    for text in expected:
        assert any(text in p for p in problems), text


def test_locations_are_spliced_and_may_nest(tmp_path: Path) -> None:
    head = ('<location id="Outer"><stateAttribute type="constant" value="A"/>'
            '<stateAttribute type="location" value="Inner"/></location>'
            '<location id="Inner"><stateAttribute type="constant" value="B"/></location>')
    problems = _lint_text(tmp_path, _provider(
        '<stateAttribute type="location" value="Outer"/><stateValue type="int" value="1"/>',
        '<stateAttribute type="constant" value="A"/><stateAttribute type="constant" value="B"/>'
        '<stateValue type="long" value="1"/>', head=head))
    assert len(problems) == 1 and 'attribute "A/B"' in problems[0]


def test_lines_are_sorted_and_one_per_problem(tmp_path: Path) -> None:
    body = _provider('<stateAttribute type="location" value="L1"/><stateValue type="null"/>',
                     '<stateAttribute type="location" value="L2"/><stateValue type="string" value="$nope"/>')
    path = tmp_path / "b.xml"
    path.write_text("<tmfxml>\n" + body.replace("<stateChange>", "\n<stateChange>") + "\n</tmfxml>\n")
    problems = lint(path)
    lines = [int(p.split(":")[1]) for p in problems]
    assert len(problems) == 3 and lines == sorted(lines)


def test_int_counters_in_a_time_graph_need_numeric_defined_values(tmp_path: Path) -> None:
    """An incremented int takes values 1, 2, 3...: declaring the increment's constant is not enough."""
    view = '<timeGraphView id="v">{defs}<entry path="N"><display type="self"/></entry></timeGraphView>'
    change = '<stateAttribute type="constant" value="N"/><stateValue type="int" value="1" increment="true"/>'
    problems = _lint_text(tmp_path, view.format(defs="") + _provider(change))
    assert len(problems) == 1 and "int values (int 1 (increment))" in problems[0]
    defs = '<definedValue name="ONE" value="1" color="#000000"/><definedValue name="TWO" value="2" color="#000000"/>'
    assert _lint_text(tmp_path, view.format(defs=defs) + _provider(change)) == []
