"""Trace Compass state-provider semantics (../shared/docs/tracecompass-xml.md §6) on tiny inputs."""

from __future__ import annotations

from typing import Any

import pytest
from lxml import etree

from tc_analyses.engine.state_system import StateTypeError
from tc_analyses.engine.xml_provider import StateProvider, XmlAnalysisError


def run(handlers: str, events: list[tuple[str, int, dict[str, Any]]], extra: str = "") -> Any:
    xml = f'<stateProvider id="t" version="1">{extra}{handlers}</stateProvider>'
    return StateProvider(etree.fromstring(xml)).run(iter(events))


def states(ss: Any, path: str) -> list[tuple[int, int, Any]]:
    return [(i.start, i.end, None if i.value is None else i.value.value) for i in ss.intervals(tuple(path.split("/")))]


SET_X = ('<eventHandler eventName="set"><stateChange><stateAttribute type="constant" value="x"/>'
         '<stateValue type="eventField" value="v"/></stateChange></eventHandler>')


def test_intervals_are_inclusive_and_end_at_the_last_event() -> None:
    ss = run(SET_X, [("set", 10, {"v": 1}), ("set", 20, {"v": 2}), ("other", 30, {})])
    assert states(ss, "x") == [(10, 19, 1), (20, 30, 2)]


def test_same_value_makes_no_new_interval_and_last_change_at_one_time_wins() -> None:
    ss = run(SET_X, [("set", 10, {"v": 1}), ("set", 15, {"v": 1}), ("set", 20, {"v": 2}), ("set", 20, {"v": 3}),
                     ("end", 25, {})])
    assert states(ss, "x") == [(10, 19, 1), (20, 25, 3)]


def test_new_attribute_is_null_from_the_start() -> None:
    ss = run(SET_X, [("other", 5, {}), ("set", 10, {"v": 1})])
    assert states(ss, "x") == [(5, 9, None), (10, 10, 1)]


def test_type_lock_fails_the_analysis() -> None:
    handlers = SET_X + ('<eventHandler eventName="int"><stateChange><stateAttribute type="constant" value="x"/>'
                        '<stateValue type="int" value="1"/></stateChange></eventHandler>')
    with pytest.raises(StateTypeError, match="x holds long values"):
        run(handlers, [("set", 1, {"v": 5}), ("int", 2, {})])


def test_increment_counts_from_null_and_a_missing_field_assigns_null() -> None:
    handler = ('<eventHandler eventName="inc"><stateChange><stateAttribute type="constant" value="n"/>'
               '<stateValue type="eventField" value="by" increment="true"/></stateChange></eventHandler>')
    ss = run(handler, [("inc", 1, {"by": 2}), ("inc", 2, {"by": 3}), ("inc", 3, {}), ("inc", 4, {"by": 1})])
    assert states(ss, "n") == [(1, 1, 2), (2, 2, 5), (3, 3, None), (4, 4, 1)]


def test_update_rewrites_the_ongoing_interval() -> None:
    handlers = SET_X + ('<eventHandler eventName="upd"><stateChange><stateAttribute type="constant" value="x"/>'
                        '<stateValue type="eventField" value="v" update="true"/></stateChange></eventHandler>')
    ss = run(handlers, [("set", 1, {"v": 7}), ("upd", 3, {"v": 9}), ("end", 5, {})])
    assert states(ss, "x") == [(1, 5, 9)]


def test_stack_push_pop_and_pop_on_empty_is_ignored() -> None:
    handlers = ('<eventHandler eventName="push"><stateChange><stateAttribute type="constant" value="s"/>'
                '<stateValue type="eventField" value="v" stack="push"/></stateChange></eventHandler>'
                '<eventHandler eventName="pop"><stateChange><stateAttribute type="constant" value="s"/>'
                '<stateValue type="null" stack="pop"/></stateChange></eventHandler>')
    ss = run(handlers, [("pop", 1, {}), ("push", 2, {"v": "a"}), ("push", 3, {"v": "b"}), ("pop", 4, {}),
                        ("pop", 5, {}), ("pop", 6, {})])
    assert states(ss, "s") == [(1, 1, None), (2, 2, 1), (3, 3, 2), (4, 4, 1), (5, 6, None)]
    # stack levels, like every attribute, are null from the state-system start
    assert states(ss, "s/1") == [(1, 1, None), (2, 4, "a"), (5, 6, None)]
    assert states(ss, "s/2") == [(1, 2, None), (3, 3, "b"), (4, 6, None)]


def test_future_time_applies_before_the_first_later_event_or_at_the_end() -> None:
    handler = ('<eventHandler eventName="go"><stateChange><stateAttribute type="constant" value="f"/>'
               '<stateValue type="string" value="done"/><futureTime type="eventField" value="at"/>'
               '</stateChange></eventHandler>')
    ss = run(handler, [("go", 10, {"at": 15}), ("x", 20, {}), ("go", 25, {"at": 40})])
    # the leftover change at 40 sets the value already held: it ends no interval, so the history
    # still ends at the last event (closeHistory takes the backend's end only when it is later)
    assert states(ss, "f") == [(10, 14, None), (15, 25, "done")]


def test_conditions_compare_numbers_numerically_and_the_rest_as_text() -> None:
    handler = ('<eventHandler eventName="e"><stateChange><if><and>'
               '<condition operator="gt"><field name="n"/><stateValue type="long" value="9"/></condition>'
               '<not><condition><field name="s"/><stateValue type="string" value="skip"/></condition></not>'
               '</and></if><then><stateAttribute type="constant" value="hit"/>'
               '<stateValue type="eventField" value="n"/></then></stateChange></eventHandler>')
    ss = run(handler, [("e", 1, {"n": 10, "s": "ok"}), ("e", 2, {"n": 9, "s": "ok"}), ("e", 3, {"n": 100, "s": "skip"}),
                       ("e", 4, {"n": 11})])
    assert states(ss, "hit") == [(1, 3, 10), (4, 4, 11)]  # a missing field compares as "null"


def test_null_path_element_skips_the_change_and_queries_resolve_names() -> None:
    handlers = ('<eventHandler eventName="name"><stateChange><stateAttribute type="constant" value="Names"/>'
                '<stateAttribute type="eventField" value="id"/><stateValue type="eventField" value="text"/>'
                '</stateChange></eventHandler>'
                '<eventHandler eventName="use"><stateChange><stateAttribute type="constant" value="By"/>'
                '<stateAttribute type="query"><stateAttribute type="constant" value="Names"/>'
                '<stateAttribute type="eventField" value="id"/></stateAttribute>'
                '<stateValue type="long" value="1"/></stateChange></eventHandler>')
    ss = run(handlers, [("name", 1, {"id": 7, "text": "alpha"}), ("use", 2, {"id": 7}), ("use", 3, {"id": 8})])
    assert states(ss, "By/alpha") == [(1, 1, None), (2, 3, 1)]
    assert ("By", "null") not in set(ss.paths())


def test_locations_defined_values_and_payload_underscore_rule() -> None:
    extra = '<definedValue name="RUN" value="2"/><location id="cur"><stateAttribute type="constant" value="cpus"/>' \
            '<stateAttribute type="eventField" value="slot"/></location>'
    handler = ('<eventHandler eventName="e"><stateChange><stateAttribute type="location" value="cur"/>'
               '<stateValue type="int" value="$RUN"/></stateChange></eventHandler>')
    # the trace's payload field _slot is "slot" to the analysis (one leading underscore dropped)
    ss = run(handler, [("e", 1, {"_slot": 3})], extra)
    assert states(ss, "cpus/3") == [(1, 1, 2)]


def test_unknown_references_and_scripts_are_refused_with_the_element() -> None:
    with pytest.raises(XmlAnalysisError, match="unknown location 'nope'"):
        run('<eventHandler eventName="e"><stateChange><stateAttribute type="location" value="nope"/>'
            '<stateValue type="null"/></stateChange></eventHandler>', [("e", 1, {})])
    with pytest.raises(XmlAnalysisError, match="script values are not supported"):
        run('<eventHandler eventName="e"><stateChange><stateAttribute type="constant" value="a"/>'
            '<stateValue type="script" value="1+1"/></stateChange></eventHandler>', [("e", 1, {})])


def test_event_names_match_as_whole_regexes_with_star_wildcards() -> None:
    handler = ('<eventHandler eventName="sys_*"><stateChange><stateAttribute type="eventName"/>'
               '<stateValue type="long" value="1" increment="true"/></stateChange></eventHandler>')
    ss = run(handler, [("sys_open", 1, {}), ("xsys_open", 2, {}), ("sys_open", 3, {})])
    assert states(ss, "sys_open") == [(1, 2, 1), (3, 3, 2)]
    assert ("xsys_open",) not in set(ss.paths())


def test_an_event_name_pattern_runs_in_linear_time() -> None:
    """`(.|.|.|.|.)+Z` backtracks 5^n ways on an n-letter name in Java's or Python's regex engine
    (`states` ran past 120 s on one); matched by RE2 it is one pass, and Trace Compass's answer (no
    match without a Z, a match with one) is kept."""
    handler = ('<eventHandler eventName="(.|.|.|.|.)+Z"><stateChange><stateAttribute type="constant" value="x"/>'
               '<stateValue type="int" value="1"/></stateChange></eventHandler>')
    long_name = "dfc:kernel_begin_" + "a" * 40
    ss = run(handler, [(long_name, 10, {}), (long_name + "Z", 20, {}), ("end", 30, {})])
    assert states(ss, "x") == [(10, 19, None), (20, 30, 1)]


def test_a_pattern_only_a_backtracking_engine_takes_is_one_line() -> None:
    handler = ('<eventHandler eventName="(a)\\1"><stateChange><stateAttribute type="constant" value="x"/>'
               '<stateValue type="int" value="1"/></stateChange></eventHandler>')
    with pytest.raises(XmlAnalysisError, match=r"event name '\(a\)\\\\1' is not a valid regex: .*linear time"):
        run(handler, [("aa", 1, {})])


@pytest.mark.parametrize(("at", "expected"), [
    ("1e999", [(10, 2**63 - 2, None)]),  # (long) 1e999 is Long.MAX_VALUE: the change waits past every event
    (float("inf"), [(10, 2**63 - 2, None)]),
    ("NaN", [(10, 20, None)]),  # (long) NaN is 0: a time in the past, the change is ignored
    ("99999999999999999999", [(10, 20, "done")]),  # past 64 bits Long.parseLong fails: the change is made now
])
def test_a_future_time_out_of_range_is_what_java_makes_of_it(at: Any, expected: list[Any]) -> None:
    """The fuzzer's huge future times ended in OverflowError. Trace Compass reads a future time as a
    Java long: a double is cast, an integer text is parsed."""
    handler = ('<eventHandler eventName="go"><stateChange><stateAttribute type="constant" value="f"/>'
               '<stateValue type="string" value="done"/><futureTime type="eventField" value="at"/>'
               '</stateChange></eventHandler>')
    ss = run(handler, [("go", 10, {"at": at}), ("x", 20, {})])
    assert states(ss, "f")[:1] == expected
