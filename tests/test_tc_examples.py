"""Trace Compass's own example analyses (../shared/tracecompass/examples) on small event lists.

Each example the engine supports runs on a few events written for it here; the expected
intervals were worked out by hand from ../shared/docs/tracecompass-xml.md (section numbers in
the comments). Examples using a construct the engine refuses (script values, timerange /
elapsedTime tests) must fail with a one-line XmlAnalysisError naming the element and its line;
the rest of such an example is then run with the refused parts cut out.

The engine has no trace aspects: the CPU that Trace Compass takes from the CPU aspect (an
Integer) is given here as a payload field "cpu" (a Long). Attribute names are the same ("0").
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from tc_analyses.engine.state_system import StateSystem
from tc_analyses.engine.xml_pattern import Pattern, load_patterns
from tc_analyses.engine.xml_provider import StateProvider, XmlAnalysisError, load_providers
from tests.helpers import SHARED_DIR

pytestmark = pytest.mark.shared  # ../shared/tracecompass/examples, through the `examples` fixture

Intervals = list[tuple[int, int, Any]]


@pytest.fixture(scope="module")
def examples() -> Path:
    """../shared/tracecompass/examples; skipped when absent. Like conftest's tc_xsd, and unlike
    shared_dir, it does not also require ../shared/traces, which these tests do not read."""
    folder = SHARED_DIR / "tracecompass" / "examples"
    if not folder.is_dir():
        pytest.skip("../shared/tracecompass not present")
    return folder


def dump(ss: StateSystem) -> dict[str, Intervals]:
    """Every attribute's intervals: {"a/b": [(start, end, value or None), ...]}."""
    return {"/".join(path): [(i.start, i.end, None if i.value is None else i.value.value) for i in intervals]
            for path, intervals in ss.items()}


def only(path: Path, tag: str) -> Any:
    """The one analysis element with this tag in an example file."""
    found = etree.parse(str(path)).getroot().findall(tag)
    assert len(found) == 1
    return found[0]


def assert_refused(error: XmlAnalysisError, path: Path, element: Any, words: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert f"{path}:{element.sourceline}: <{element.tag}>" in message
    assert words in message


# ---------------------------------------------------------------- test_valid.xml (kernel state provider)
KERNEL_EVENTS = [
    ("sched_switch", 10, {"cpu": 0, "prev_comm": "swapper/0", "prev_tid": 0, "prev_state": 0,
                          "next_comm": "bash", "next_tid": 100}),
    ("sys_open", 20, {"cpu": 0, "filename": "/etc/passwd"}),
    ("irq_handler_entry", 30, {"cpu": 0, "irq": 5, "name": "eth0"}),
    ("irq_handler_exit", 40, {"cpu": 0, "irq": 5, "ret": 1}),
    ("exit_syscall", 50, {"cpu": 0, "ret": 3}),
    ("sched_process_fork", 60, {"cpu": 0, "parent_comm": "bash", "parent_tid": 100, "child_comm": "bash",
                                "child_tid": 101}),
    ("sched_switch", 70, {"cpu": 0, "prev_comm": "bash", "prev_tid": 100, "prev_state": 1,
                          "next_comm": "swapper/0", "next_tid": 0}),
    ("sched_wakeup", 80, {"cpu": 0, "comm": "bash", "tid": 100}),
    ("softirq_entry", 90, {"cpu": 0, "vec": 3}),
    ("softirq_exit", 100, {"cpu": 0, "vec": 3}),
    ("sched_process_free", 110, {"cpu": 0, "comm": "bash", "tid": 101}),
    ("lttng_statedump_process_state", 120, {"cpu": 0, "tid": 200, "ppid": 1, "name": "init", "status": 5}),
]

# CPU status: 0 idle, 1 user mode, 2 syscall, 3 irq, 4 softirq; thread status: 1 blocked,
# 2 user mode, 3 syscall, 4 interrupted, 5 waiting for CPU.
KERNEL_EXPECTED: dict[str, Intervals] = {
    "CPUs": [(10, 120, None)],
    "CPUs/0": [(10, 120, None)],
    # next_tid forcedType int; 0 from the switch to swapper at 70
    "CPUs/0/Current_thread": [(10, 69, 100), (70, 120, 0)],
    # 1 user mode, 2 syscall (sys_open), 3 irq, 2 back in the syscall, 1 after exit_syscall,
    # 0 idle (next_tid 0), 4 softirq, then softirq_exit: 1 (no syscall) then 0 (Current_thread
    # eq int 0) at the same time, the last wins
    "CPUs/0/Status": [(10, 19, 1), (20, 29, 2), (30, 39, 3), (40, 49, 2), (50, 69, 1), (70, 89, 0),
                      (90, 99, 4), (100, 120, 0)],
    "Resources": [(10, 120, None)],
    "Resources/IRQs": [(10, 120, None)],
    "Resources/IRQs/5": [(10, 29, None), (30, 39, 0), (40, 120, None)],  # the CPU that handles it
    "Resources/Soft_IRQs": [(10, 120, None)],
    "Resources/Soft_IRQs/3": [(10, 89, None), (90, 99, 0), (100, 120, None)],
    "Threads": [(10, 120, None)],
    "Threads/0": [(10, 120, None)],
    "Threads/0/Exec_name": [(10, 69, None), (70, 120, "swapper/0")],
    "Threads/0/Status": [(10, 69, 5), (70, 89, 2), (90, 99, 4), (100, 120, 2)],
    "Threads/0/System_call": [(10, 120, None)],  # only queried: created, all null (§6.3)
    "Threads/100": [(10, 120, None)],
    "Threads/100/Exec_name": [(10, 120, "bash")],
    # user mode, syscall, interrupted, syscall again, user mode, blocked (prev_state 1), woken
    "Threads/100/Status": [(10, 19, 2), (20, 29, 3), (30, 39, 4), (40, 49, 3), (50, 69, 2), (70, 79, 1),
                           (80, 120, 5)],
    "Threads/100/System_call": [(10, 19, None), (20, 49, "sys_open"), (50, 120, None)],
    "Threads/101": [(10, 120, None)],  # sched_process_free "deletes" it: a null on a null
    "Threads/101/Exec_name": [(10, 59, None), (60, 120, "bash")],
    "Threads/101/PPID": [(10, 59, None), (60, 120, 100)],
    "Threads/101/Status": [(10, 59, None), (60, 120, 5)],
    # copied from the parent (null), then "sys_clone" since it is null
    "Threads/101/System_call": [(10, 59, None), (60, 120, "sys_clone")],
    "Threads/200": [(10, 120, None)],
    "Threads/200/Exec_name": [(10, 119, None), (120, 120, "init")],
    "Threads/200/PPID": [(10, 119, None), (120, 120, 1)],
    "Threads/200/Status": [(10, 119, None), (120, 120, 1)],  # statedump status 5: blocked
}


def test_valid_kernel_state_provider(examples: Path) -> None:
    (provider,) = load_providers(examples / "test_valid.xml")
    assert provider.id == "kernel.linux.sp"
    ss = provider.run(iter(KERNEL_EVENTS))
    assert dump(ss) == KERNEL_EXPECTED
    assert ss.intervals(("CPUs", "0", "Current_thread"))[0].value.kind == "int"  # forcedType="int"


# ---------------------------------------------------------------- kvm_exits.xml
def test_kvm_exits_counts_exit_reasons(examples: Path) -> None:
    (provider,) = load_providers(examples / "kvm_exits.xml")
    events = [("kvm_exit", 1, {"exit_reason": 30}), ("kvm_exit", 2, {"exit_reason": 1}),
              ("kvm_entry", 3, {}), ("kvm_exit", 4, {"exit_reason": 30}), ("kvm_exit", 5, {"exit_reason": 30})]
    assert dump(provider.run(iter(events))) == {
        "Reasons": [(1, 5, None)],
        "Reasons/1": [(1, 1, None), (2, 5, 1)],
        "Reasons/30": [(1, 3, 1), (4, 4, 2), (5, 5, 3)],  # int 1 increment from null (§6.6)
    }


# ---------------------------------------------------------------- test_experiment.xml
def test_experiment_provider_updates_the_ongoing_state(examples: Path) -> None:
    (provider,) = load_providers(examples / "test_experiment.xml")
    # an experiment's provider sees the events of all its traces merged in time order
    events = [("entry", 1, {"cpu": 0}), ("entry", 2, {"cpu": 1}), ("exit", 4, {"cpu": 0, "curState": "GOOD"}),
              ("exit", 6, {"cpu": 1, "curState": "BAD"}), ("entry", 8, {"cpu": 0})]
    assert dump(provider.run(iter(events))) == {
        "update": [(1, 8, None)],
        "update/0": [(1, 7, "GOOD"), (8, 8, "UNKNOWN")],  # "UNKNOWN" rewritten from its start (§6.5)
        "update/1": [(1, 1, None), (2, 8, "BAD")],
    }


# ---------------------------------------------------------------- test_state_values.xml
def test_state_values_is_refused_for_its_script_values(examples: Path) -> None:
    path = examples / "test_state_values.xml"
    first_script = next(e for e in etree.parse(str(path)).iter("stateValue", "futureTime")
                        if e.get("type") == "script")
    with pytest.raises(XmlAnalysisError) as info:
        load_providers(path)
    assert_refused(info.value, path, first_script, "script values are not supported")


def test_state_values_without_its_scripts(examples: Path) -> None:
    """The example with every state change that uses a script (value or futureTime) cut out."""
    element = copy.deepcopy(only(examples / "test_state_values.xml", "stateProvider"))
    for change in list(element.iter("stateChange")):
        if any(v.get("type") == "script" for v in change.iter("stateValue", "futureTime")):
            change.getparent().remove(change)
    events = [("entry", 1, {"cpu": 0, "op": "op1", "hostID": "host"}),
              ("exit", 3, {"cpu": 0, "curState": "GOOD", "op": "read only"}),
              ("entry", 5, {"cpu": 0, "op": "x", "hostID": "host"}),
              ("exit", 7, {"cpu": 0, "curState": "BAD", "op": "x"})]
    assert dump(StateProvider(element).run(iter(events))) == {
        # the documented example (§6.5): "UNKNOWN" at 1, updated to "GOOD" at 3, null at 3
        "update": [(1, 7, None)],
        "update/0": [(1, 2, "GOOD"), (3, 4, None), (5, 6, "BAD"), (7, 7, None)],
        "modify": [(1, 7, None)],
        "modify/0": [(1, 2, "UNKNOWN"), (3, 4, "GOOD"), (5, 6, "UNKNOWN"), (7, 7, "BAD")],
        "hostID": [(1, 7, "host")],
        # pushes of the timestamp (a Long); the exit pops when the peeked top (type="long"
        # stack="peek") equals long 5: not at 3 (top 1), at 7 (top 5)
        "stack": [(1, 4, 1), (5, 6, 2), (7, 7, 1)],
        "stack/1": [(1, 7, 1)],
        "stack/2": [(1, 4, None), (5, 6, 5), (7, 7, None)],
        # entry: op eq the mapping of "read only" ("op1"); exit: op eq "read only"
        "mapped": [(1, 4, "TRUE"), (5, 7, "FALSE")],
        "future": [(1, 7, 100)],
        "futureStr": [(1, 7, 100)],
    }


# ---------------------------------------------------------------- irq_analysis_lttng.xml (pattern)
def test_irq_pattern_matches_entries_and_exits_per_cpu(examples: Path) -> None:
    (pattern,) = load_patterns(examples / "irq_analysis_lttng.xml")
    events = [("irq_handler_entry", 10, {"cpu": 0, "irq": 5, "name": "eth0"}),
              ("sched_switch", 15, {"cpu": 0, "next_tid": 42}),
              ("irq_handler_entry", 20, {"cpu": 1, "irq": 7, "name": "ahci"}),
              ("irq_handler_exit", 30, {"cpu": 1, "irq": 7, "ret": 1}),
              ("irq_handler_exit", 40, {"cpu": 0, "irq": 5, "ret": 2})]
    segments, ss = pattern.run(iter(events))
    # the exit on CPU 1 passes test_cpu only for the scenario that stored cpu 1
    assert [(s.name, s.start, s.end, s.content) for s in segments] == [
        ("ahci", 20, 30, {"ret": 1, "irq": 7, "cpu": 1}),
        ("eth0", 10, 40, {"ret": 2, "irq": 5, "cpu": 0}),
    ]
    states = dump(ss)
    assert states["CPUs/0/Current_thread"] == [(10, 14, None), (15, 40, 42)]
    base = "scenarios/irq_handler"
    assert states[f"{base}/0/status"] == [(10, 39, 1), (40, 40, 2)]
    assert states[f"{base}/0/irq"] == [(10, 39, 5), (40, 40, None)]  # recycled when matched
    assert states[f"{base}/0/name"] == [(10, 39, "eth0"), (40, 40, None)]
    # scenario 1 is made pending at 15 (the FSM had no pending scenario left after 10), even
    # though the sched_switch does not pass the FSM's precondition
    assert states[f"{base}/1/status"] == [(10, 14, None), (15, 19, 0), (20, 29, 1), (30, 40, 2)]
    assert states[f"{base}/1/state"] == [(10, 14, None), (15, 19, "wait_irq_entry"), (20, 29, "wait_irq_exit"),
                                         (30, 40, "irq")]
    assert states[f"{base}/2/status"] == [(10, 29, None), (30, 40, 0)]  # pending since 30
    # multiple="false": one scenario, started by the first sched_switch, looping in its state; still
    # in progress at the end, it is abandoned (Trace Compass disposes the pattern) at the history's
    # end time: the latest interval stored ends at 39 (the changes at 40), so null from 39, not 40
    assert states["scenarios/sched_switch/0/status"] == [(10, 14, 0), (15, 38, 1), (39, 40, None)]
    assert states["scenarios/sched_switch/0/state"] == [(10, 38, "sched_switch"), (39, 40, None)]
    assert "scenarios/sched_switch/1" not in states


# ---------------------------------------------------------------- test_valid_pattern.xml (pattern)
def test_valid_pattern_is_refused_for_its_timerange_test(examples: Path) -> None:
    path = examples / "test_valid_pattern.xml"
    timerange = next(etree.parse(str(path)).iter("timerange"))
    with pytest.raises(XmlAnalysisError) as info:
        load_patterns(path)
    assert_refused(info.value, path, timerange, "tests are not supported by the headless engine")


def test_valid_pattern_without_its_time_test(examples: Path) -> None:
    """The syscall pattern with its (unused) timerange/elapsedTime test cut out."""
    element = copy.deepcopy(only(examples / "test_valid_pattern.xml", "pattern"))
    handler = element.find("patternHandler")
    handler.remove(next(t for t in handler.findall("test") if t.get("id") == "time_condition"))
    events = [("sched_switch", 1, {"cpu": 0, "next_tid": 8998}),
              ("sys_open", 2, {"cpu": 0, "filename": "/etc/passwd", "flags": 0}),
              ("exit_syscall", 3, {"cpu": 0, "ret": 3})]
    segments, ss = Pattern(element).run(iter(events))
    # The syscall FSM has both initial="wait_syscall_entry_x" and an <initial> element: the
    # attribute wins, and an <initial>'s cond (tid_8998) is never evaluated anyway.
    # The segment is named by the stored syscall name and carries the stored fields saved on
    # the entry (filename, flags) and on the exit (ret), by alias (§3).
    assert [(s.name, s.start, s.end, s.content) for s in segments] == [
        ("sys_open", 2, 3, {"filename": "/etc/passwd", "flags": 0, "ret": 3})]
    states = dump(ss)
    assert states["CPUs/0/Current_thread"] == [(1, 3, 8998)]
    scenario = "scenarios/syscall/0"
    assert states[f"{scenario}/syscall/name"] == [(1, 1, None), (2, 2, "sys_open"), (3, 3, None)]
    assert states[f"{scenario}/thread"] == [(1, 1, None), (2, 2, 8998), (3, 3, None)]
    assert states[f"{scenario}/storedFields/filename"] == [(1, 1, None), (2, 2, "/etc/passwd"), (3, 3, None)]
    assert states[f"{scenario}/status"] == [(1, 1, 0), (2, 2, 1), (3, 3, 2)]
    assert states["scenarios/syscall/1/state"] == [(1, 2, None), (3, 3, "wait_syscall_entry_x")]
    # abandoned at the history's end time: the changes at 3 end intervals at 2
    assert states["scenarios/sched_switch/0/status"] == [(1, 1, 1), (2, 3, None)]
