"""The sequential unit on precomputed columns (tc_analyses/engine/sequential.py) against the
interpreter: random providers shaped like gpu.xml's first-free-lane choice (changes that read each
other's writes), with the variations a user's XML can add (an increment inside the cycle, field
conditions, operators, a string table read by query, mapping groups, forced types, null path
elements, unknown strings, ties), over random events. Each provider runs four ways: the
interpreter event by event, the columnar engine with the unit solved by array passes
(tc_analyses/engine/speculative.py, given the rounds to settle), the same with the unit's event
loop on columns, and the columnar engine with the unit on the interpreter's compiled changes (as
before); all four give the same attributes and intervals, or fail with the same error."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lxml import etree

from tc_analyses.engine import build, columnar, speculative
from tc_analyses.engine.columnar import ColumnarProvider, run_columnar
from tc_analyses.engine.events import rows_of
from tc_analyses.engine.sequential import SequentialRunner, Unsupported
from tc_analyses.engine.xml_provider import StateProvider
from tc_analyses.errors import DfcompassError

Event = tuple[str, int, dict[str, Any]]
OPERATORS = ["eq", "ne", "lt", "le", "gt", "ge"]


def _lane_path(lane: int) -> str:
    path = '<stateAttribute type="constant" value="Q"/><stateAttribute type="eventField" value="q"/>'
    return path + (f'<stateAttribute type="constant" value="L{lane}"/>' if lane else "")


SELECTED = '<stateAttribute type="constant" value="Sel"/><stateAttribute type="eventField" value="c"/>'


def provider_xml(rng: random.Random) -> str:
    """A stateProvider whose lane choice and lane writes read each other (one sequential unit)."""
    lanes = rng.randint(1, 3)
    count = rng.random() < 0.5  # an increment that joins the cycle
    free_value = rng.choice(['<stateValue type="null"/>', '<stateValue type="string" value="$IDLE"/>'])

    def choice(lane: int) -> str:
        if lane == lanes:
            return f'{SELECTED}<stateValue type="int" value="{lane}"/>'
        test = (f'<or><condition>{_lane_path(lane)}<stateValue type="null"/></condition>'
                f'<condition>{_lane_path(lane)}<stateValue type="string" value="$IDLE"/></condition></or>')
        if count and lane == 0:
            test = (f'<and>{test}<condition operator="{rng.choice(OPERATORS)}"><stateAttribute type="constant" '
                    f'value="Cnt"/><stateAttribute type="eventField" value="q"/><stateValue type="long" '
                    f'value="{rng.randint(0, 3)}"/></condition></and>')
        if rng.random() < 0.3:  # read only where the lane is free: the interpreter makes Probe/<c> only then
            test = (f'<and>{test}<condition><stateAttribute type="constant" value="Probe"/>'
                    f'<stateAttribute type="eventField" value="c"/><stateValue type="null"/></condition></and>')
        if rng.random() < 0.3:
            test = (f'<and>{test}<not><condition operator="{rng.choice(OPERATORS)}"><field name="v"/>'
                    f'<stateValue type="long" value="{rng.randint(0, 4)}"/></condition></not></and>')
        return (f'<if>{test}</if><then>{SELECTED}<stateValue type="int" value="{lane}"/></then>'
                f'<else>{choice(lane + 1)}</else>')

    label = rng.choice([
        '<stateValue type="query"><stateAttribute type="constant" value="Strings"/>'
        '<stateAttribute type="eventField" value="label"/></stateValue>',
        '<stateValue type="eventField" value="v" mappingGroup="kinds"/>',
        '<stateValue type="eventField" value="v" forcedType="string"/>',
        '<stateValue type="eventName"/>',
    ])

    def by_lane(lane: int, value: str) -> str:
        if lane > lanes:
            return f"{_lane_path(0)}{value}"
        return (f'<if><condition operator="{rng.choice(["eq", "eq", "ge"])}">{SELECTED}<stateValue type="int" '
                f'value="{lane}"/></condition></if><then>{_lane_path(lane)}{value}</then>'
                f'<else>{by_lane(lane + 1, value)}</else>')

    counter = ""
    if count:
        counter = (f'<stateChange><if><condition>{SELECTED}<stateValue type="int" value="0"/></condition></if>'
                   f'<then><stateAttribute type="constant" value="Cnt"/><stateAttribute type="eventField" '
                   f'value="q"/><stateValue type="long" value="1" increment="true"/></then></stateChange>')
    return f"""<tmfxml><stateProvider id="t.lanes" version="1">
<definedValue name="IDLE" value="idle"/>
<mappingGroup id="kinds"><entry><stateValue type="long" value="1"/><stateValue type="string" value="one"/></entry>
<entry><stateValue type="long" value="2"/><stateValue type="string" value="two &lt;&amp;&gt;"/></entry></mappingGroup>
<eventHandler eventName="str"><stateChange><stateAttribute type="constant" value="Strings"/>
<stateAttribute type="eventField" value="sid"/><stateValue type="eventField" value="text"/></stateChange></eventHandler>
<eventHandler eventName="begin">
<stateChange>{choice(1 if lanes > 1 and rng.random() < 0.2 else 0)}</stateChange>
<stateChange>{by_lane(1, label)}</stateChange>{counter}
</eventHandler>
<eventHandler eventName="end">
<stateChange>{by_lane(1, free_value)}</stateChange>
<stateChange>{SELECTED}<stateValue type="null"/></stateChange>
</eventHandler>
<eventHandler eventName="(begin|end)">
<stateChange><stateAttribute type="constant" value="Last"/><stateValue type="eventName"/></stateChange>
</eventHandler>
</stateProvider></tmfxml>"""


def random_events(rng: random.Random) -> list[Event]:
    events: list[Event] = [("str", 0, {"sid": s, "text": t}) for s, t in enumerate(["gemm", "a<b & 'c'", "ü.*["])]
    t, next_id = 1, 0
    open_ids: list[tuple[int, int | None]] = []
    for _ in range(rng.randint(5, 60)):
        t += rng.choice([0, 0, 1, 3])  # ties are common
        if open_ids and rng.random() < 0.45:
            ended, queue = open_ids.pop(rng.randrange(len(open_ids)))
            events.append(("end", t, {"q": queue, "c": ended}))
            continue
        q = rng.choice([0, 1, 1, 2, None])  # None: a null path element, the change is skipped
        c = next_id if rng.random() < 0.9 else rng.randint(0, max(next_id, 1))  # a reused id now and then
        next_id += 1
        events.append(("begin", t, {"q": q, "c": c, "v": rng.randint(0, 4), "label": rng.choice([0, 1, 2, 7])}))
        if rng.random() < 0.85:
            open_ids.append((c, q))
        if rng.random() < 0.05:
            events.append(("end", t, {"q": q, "c": 10_000 + c}))  # an end that began nowhere
    return events


def _outcome(run: Any) -> tuple[str, Any]:
    try:
        ss = run()
    except DfcompassError as exc:
        return "error", type(exc).__name__
    return "ok", {path: [(i.start, i.end, i.value) for i in intervals] for path, intervals in ss.items()}


def _on_interpreter_changes(self: SequentialRunner, change: Any, frame: Any) -> Any:
    raise Unsupported("the test asks for the interpreter's changes")


@pytest.mark.parametrize("seed", range(120))
def test_random_lane_providers_match_the_interpreter(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    element = etree.fromstring(provider_xml(rng)).find("stateProvider")
    events = random_events(rng)
    span = (events[0][1], max(e[1] for e in events))
    provider = StateProvider(element)
    assert any(unit.kind == "sequential" for unit in ColumnarProvider(provider).units)
    reference = _outcome(lambda: provider.run(events, span))
    with monkeypatch.context() as patched:
        patched.setattr(speculative, "ROUNDS", 64)  # these dense random events take up to 27 rounds
        solved = _outcome(lambda: run_columnar(provider, rows_of(events), span))
        patched.setattr(speculative, "ROUNDS", 0)
        looped = _outcome(lambda: run_columnar(provider, rows_of(events), span))
        patched.setattr(SequentialRunner, "compile", _on_interpreter_changes)
        before = _outcome(lambda: run_columnar(provider, rows_of(events), span))
    assert solved == reference
    assert looped == reference
    assert before == reference


def _solved(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each sequential unit the columnar engine runs was settled by array passes."""
    outcomes: list[bool] = []
    original = speculative.solve

    def watching(*args: Any) -> Any:
        got = original(*args)
        outcomes.append(got is not None)
        return got

    monkeypatch.setattr(columnar, "solve", watching)
    return outcomes


def test_the_lane_providers_are_solved_by_array_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The array passes settle on the random providers that do not fail (the loop runs only where
    they do not settle), and a unit short of rounds goes to the loop."""
    outcomes = _solved(monkeypatch)
    monkeypatch.setattr(speculative, "ROUNDS", 64)
    for seed in range(20):
        rng = random.Random(seed)
        provider = StateProvider(etree.fromstring(provider_xml(rng)).find("stateProvider"))
        events = random_events(rng)
        if _outcome(lambda: provider.run(events, (events[0][1], max(e[1] for e in events))))[0] == "ok":
            outcomes.clear()
            run_columnar(provider, rows_of(events), (events[0][1], max(e[1] for e in events)))
            assert outcomes == [True], seed
    monkeypatch.setattr(speculative, "ROUNDS", 1)  # one round cannot show a guess reproducing itself
    outcomes.clear()
    run_columnar(provider, rows_of(events), (events[0][1], max(e[1] for e in events)))
    assert outcomes == [False]


def test_the_lane_providers_take_the_column_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """The random providers above do run on columns (none falls back to the interpreter's changes)."""
    compiled: list[int] = []
    original = SequentialRunner.compile

    def counting(self: SequentialRunner, change: Any, frame: Any) -> Any:
        got = original(self, change, frame)
        compiled.append(1)
        return got

    monkeypatch.setattr(SequentialRunner, "compile", counting)
    for seed in range(20):
        rng = random.Random(seed)
        provider = StateProvider(etree.fromstring(provider_xml(rng)).find("stateProvider"))
        events = random_events(rng)
        compiled.clear()
        run_columnar(provider, rows_of(events), (0, max(e[1] for e in events)))
        assert compiled, seed


def _refusals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reasons the sequential runner gives for leaving a change to the interpreter's changes."""
    refused: list[str] = []
    original = SequentialRunner.compile

    def watching(self: SequentialRunner, change: Any, frame: Any) -> Any:
        try:
            return original(self, change, frame)
        except Unsupported as exc:
            refused.append(str(exc))
            raise

    monkeypatch.setattr(SequentialRunner, "compile", watching)
    return refused


def test_a_query_of_the_units_own_writes_goes_to_the_interpreters_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value read from an attribute the unit itself writes cannot be read ahead: refused, and the
    unit still gives the interpreter's result through its compiled changes."""
    xml = f"""<tmfxml><stateProvider id="t.own" version="1"><eventHandler eventName="begin">
<stateChange><if><condition>{_lane_path(0)}<stateValue type="null"/></condition></if>
<then>{SELECTED}<stateValue type="query">{_lane_path(0)}</stateValue></then>
<else>{SELECTED}<stateValue type="int" value="1"/></else></stateChange>
<stateChange>{_lane_path(0)}<stateValue type="query">{SELECTED}</stateValue></stateChange>
</eventHandler></stateProvider></tmfxml>"""
    provider = StateProvider(etree.fromstring(xml).find("stateProvider"))
    events = [("begin", t, {"q": t % 2, "c": t % 3}) for t in range(1, 9)]
    refused = _refusals(monkeypatch)
    got = _outcome(lambda: run_columnar(provider, rows_of(events), (1, 8)))
    assert refused and "itself writes" in refused[0]
    assert got == _outcome(lambda: provider.run(events, (1, 8)))


def test_gpu_queues_on_a_recorded_trace_take_the_column_route(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """gpu.xml generated for our all-classes trace: its lane unit compiles to columns and the state
    system equals the interpreter's."""
    from tests.test_engine.test_engine_equivalence import TRACES, generated_xml, snapshot

    trace = TRACES[0]
    files = [f for f in generated_xml(trace, tmp_path) if f.name == "gpu.xml"]
    assert files
    refused = _refusals(monkeypatch)
    solved = _solved(monkeypatch)
    built = build(trace, files)
    assert not refused
    assert solved == [True]  # settled by array passes, not the event loop
    assert snapshot(built) == snapshot(build(trace, files, engine="events"))
    lanes = [p for ss in built.systems.values() for p in ss.paths() if "Lanes" in p]
    assert lanes  # the trace has GPU work: the unit ran


def test_value_texts_are_string_value_of() -> None:
    """Values.texts (path elements from value ids, longs converted as one array) equals str() of
    each value: ints, longs (negative, past 64 bits), doubles, strings, null."""
    from tc_analyses.engine.ids import Values
    from tc_analyses.engine.state_system import Value

    values = Values()
    made = [values.intern(v) for v in (None, Value("int", -3), Value("long", 2**70), Value("double", 0.1),
                                         Value("string", "a<&>ü"), Value("long", 5))]
    made += values.longs(np.array([-(2**63), 0, 2**63 - 1, 5], dtype=np.int64)).tolist()
    ids = np.array(made * 2, dtype=np.int64)
    expected = [None if (v := values.item(i)) is None else str(v) for i in ids.tolist()]
    assert values.texts(ids) == expected
    assert "1180591620717411303424" in expected and "-9223372036854775808" in expected


def test_long_sums_equal_the_increment_loop() -> None:
    """The accumulate unit's array route (running sums, restarted by each assignment or null
    increment) against the per-change rule it replaces, on random change lists; other kinds and
    sums that could pass 64 bits are left to the loop (None)."""
    from tc_analyses.engine.columnar import long_sums
    from tc_analyses.engine.ids import Values
    from tc_analyses.engine.state_system import Value

    rng = random.Random(3)
    for _ in range(300):
        table = Values()
        n = rng.randint(1, 40)
        attrs = np.sort(np.array([rng.randint(1, 4) for _ in range(n)], dtype=np.int64))
        values = np.array([table.intern(rng.choice([None, Value("long", rng.randint(-5, 5))])) for _ in range(n)],
                          dtype=np.int64)
        increments = np.array([rng.random() < 0.7 for _ in range(n)], dtype=bool)
        expected, current = [], {}
        for a, v, inc in zip(attrs.tolist(), values.tolist(), increments.tolist()):
            new, old = table.item(v), table.item(current.get(a, 0))
            if inc and new is not None:
                new = Value("long", (old.value if old is not None else 0) + new.value)  # type: ignore[operator]
            current[a] = table.intern(new)
            expected.append(current[a])
        got = long_sums(table, attrs, values, increments)
        assert got is not None and got.tolist() == expected
    table = Values()
    mixed = np.array([table.intern(Value("int", 1)), table.intern(Value("long", 1))], dtype=np.int64)
    assert long_sums(table, np.array([1, 1]), mixed, np.array([True, True])) is None
    huge = table.longs(np.array([2**62, 2**62], dtype=np.int64))
    assert long_sums(table, np.array([1, 1]), huge, np.array([True, True])) is None
    lowest = table.longs(np.array([-(2**63), -1], dtype=np.int64))  # |-2^63| does not fit an int64
    assert long_sums(table, np.array([1, 1]), lowest, np.array([True, True])) is None


S_OF_A = '<stateAttribute type="constant" value="S"/><stateAttribute type="eventField" value="a"/>'


@pytest.mark.parametrize("other, second", [
    # int(NaN) on the NaN row, which takes "then"; the second row (S/1 set) takes "else"
    (f'{S_OF_A}<stateValue type="eventField" value="d" forcedType="long"/>', 1),
    # an operator Trace Compass does not know, on a branch no row reaches (each S/<a> is new)
    (f'<if><condition operator="neq"><field name="a"/><stateValue type="long" value="1"/></condition></if>'
     f'<then>{S_OF_A}<stateValue type="long" value="2"/></then>', 2),
])
def test_what_fails_on_rows_no_branch_runs_is_left_to_the_interpreter(other: str, second: int) -> None:
    """The runner computes a branch's values and field conditions for every row of the class; where
    that fails on a row the interpreter never evaluates the branch for, the unit takes the
    interpreter's changes and gives its result (here: no error at all)."""
    xml = f"""<tmfxml><stateProvider id="t" version="1"><eventHandler eventName="e"><stateChange>
<if><condition>{S_OF_A}<stateValue type="null"/></condition></if>
<then>{S_OF_A}<stateValue type="long" value="1"/></then><else>{other}</else></stateChange></eventHandler>
</stateProvider></tmfxml>"""
    provider = StateProvider(etree.fromstring(xml).find("stateProvider"))
    events = [("e", 1, {"a": 1, "d": float("nan")}), ("e", 2, {"a": second, "d": 2.5})]
    reference = _outcome(lambda: provider.run(events, (1, 2)))
    assert reference[0] == "ok"
    assert _outcome(lambda: run_columnar(provider, rows_of(events), (1, 2))) == reference


@pytest.mark.parametrize("sequential", [False, True])
def test_a_timestamp_field_some_events_lack_is_the_event_time(sequential: bool) -> None:
    """field_value's rule, row by row: a "timestamp" field where the event has one, else its time
    (a plain unit and a sequential one)."""
    change = f"{S_OF_A}<stateValue type=\"eventField\" value=\"timestamp\"/>"
    if sequential:
        change = (f'<if><condition>{S_OF_A}<stateValue type="null"/></condition></if><then>{change}</then>')
    xml = f"""<tmfxml><stateProvider id="t" version="1"><eventHandler eventName="e"><stateChange>{change}
</stateChange></eventHandler></stateProvider></tmfxml>"""
    provider = StateProvider(etree.fromstring(xml).find("stateProvider"))
    events = [("e", 1, {"a": 1, "timestamp": 100}), ("e", 2, {"a": 2}), ("e", 3, {"a": 3, "timestamp": None})]
    got = _outcome(lambda: run_columnar(provider, rows_of(events), (1, 3)))
    assert got == _outcome(lambda: provider.run(events, (1, 3)))
    assert [i[2].value for i in got[1][("S", "2")] if i[2] is not None] == [2]


@pytest.mark.parametrize("stamps", [(("e", 1), ("f", 2), ("e", 1), ("f", 2)), (("e", 1), ("e", 2), ("e", 2), ("e", 1))])
def test_a_type_clash_is_named_as_the_interpreter_names_it(stamps: tuple[tuple[str, int], ...],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The clash reported is the earliest one (not the attribute made first, which depends on the
    route): the interpreter, the array passes and the event loop name the same attribute and time."""
    path = '<stateAttribute type="constant" value="S"/><stateAttribute type="eventField" value="a"/>'
    change = (f'<stateChange><if><condition>{path}<stateValue type="null"/></condition></if>'
              f'<then>{path}<stateValue type="long" value="1"/></then>'
              f'<else>{path}<stateValue type="string" value="x"/></else></stateChange>')
    xml = (f'<tmfxml><stateProvider id="t.clash" version="1"><eventHandler eventName="f">{change}</eventHandler>'
           f'<eventHandler eventName="e">{change}</eventHandler></stateProvider></tmfxml>')
    provider = StateProvider(etree.fromstring(xml).find("stateProvider"))
    events = [(name, t, {"a": a}) for t, (name, a) in enumerate(stamps, 1)]

    def message(run: Any) -> str:
        with pytest.raises(DfcompassError) as raised:
            run()
        return str(raised.value)

    expected = message(lambda: provider.run(events, (1, len(events))))
    assert "at t=3" in expected
    for rounds in (64, 0):  # the array passes, the event loop
        monkeypatch.setattr(speculative, "ROUNDS", rounds)
        assert message(lambda: run_columnar(provider, rows_of(events), (1, len(events)))) == expected
