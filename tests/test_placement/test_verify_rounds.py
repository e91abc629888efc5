"""dfcompass verify's rounds on synthetic numbers: the A/B alternation, the stop rule, the bootstrap,
the baseline placement and the comparison with the plan's printed range. No program runs here."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from tc_analyses.analyses.placement.verify import (CI_HALF_WIDTH, MAX_PAIRS, MIN_PAIRS, Round, baseline_plan,
                                                   bootstrap_ci, measure_round, median_round, pair_ratios,
                                                   predicted_step, run_rounds, stop_reason, summarise)
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.activity import Activity, NodeRun


def _round(side: str, pair: int, step_ns: float) -> Round:
    return Round(side, pair, f"{side}{pair}", step_ns, 5, 1.0, 1.0, 1.0, 1.0)


def _runner(steps: dict[str, list[float]]) -> tuple[Any, list[str]]:
    """A fake `run(side, pair)` that returns the next step time of the side, and the calls it saw."""
    calls: list[str] = []

    def run(side: str, pair: int) -> Round:
        calls.append(f"{side}{pair}")
        return _round(side, pair, steps[side][pair])

    return run, calls


def test_rounds_alternate_baseline_and_plan_and_stop_at_the_minimum_when_the_ratios_agree() -> None:
    run, calls = _runner({"a": [20.0] * 20, "b": [10.0] * 20})
    rounds, stop = run_rounds(run)
    assert calls == [f"{side}{pair}" for pair in range(MIN_PAIRS) for side in "ab"]
    assert [r.side for r in rounds] == ["a", "b"] * MIN_PAIRS
    assert pair_ratios(rounds) == [2.0] * MIN_PAIRS and "within" in stop


def test_rounds_go_on_while_the_interval_is_wide_and_stop_at_the_cap() -> None:
    wild = [10.0, 40.0, 15.0, 35.0, 12.0, 30.0, 11.0, 38.0] * 3  # ratios 1x to 4x: never within 15%
    run, calls = _runner({"a": wild, "b": [10.0] * len(wild)})
    rounds, stop = run_rounds(run)
    assert len(calls) == 2 * MAX_PAIRS and len(pair_ratios(rounds)) == MAX_PAIRS
    assert "most allowed" in stop


def test_rounds_stop_once_the_interval_narrows() -> None:
    # Three wide pairs, then steady ones: the median settles and the interval closes in.
    a = [10.0, 30.0, 18.0] + [20.0] * 20
    run, calls = _runner({"a": a, "b": [10.0] * len(a)})
    rounds, stop = run_rounds(run, min_pairs=3, max_pairs=15)
    ratios = pair_ratios(rounds)
    assert 3 < len(ratios) < 15 and "within" in stop
    low, high = bootstrap_ci(ratios)
    median = statistics.median(ratios)
    assert median * (1 - CI_HALF_WIDTH) <= low and high <= median * (1 + CI_HALF_WIDTH)
    assert stop_reason(ratios[:-1], 3, 15) is None  # one pair fewer was not enough


def test_no_stop_before_the_minimum_and_a_cap_below_it_is_raised_to_it() -> None:
    assert stop_reason([2.0, 2.0], min_pairs=3) is None
    run, calls = _runner({"a": [20.0] * 10, "b": [10.0] * 10})
    run_rounds(run, min_pairs=4, max_pairs=2)
    assert len(calls) == 8


def test_the_bootstrap_is_deterministic_and_holds_the_median() -> None:
    values = [1.1, 0.9, 1.3, 1.0, 0.95, 1.2, 1.05]
    low, high = bootstrap_ci(values)
    assert (low, high) == bootstrap_ci(values)  # a fixed seed: the same rounds give the same interval
    assert low <= statistics.median(values) <= high
    assert min(values) <= low and high <= max(values)
    wide = bootstrap_ci(values, confidence=0.99)
    assert wide[0] <= low and high <= wide[1]
    assert bootstrap_ci([1.5]) == (1.5, 1.5)
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_ratios_pair_the_rounds_run_back_to_back() -> None:
    rounds = [_round("a", 0, 30.0), _round("b", 0, 10.0), _round("a", 1, 40.0), _round("b", 1, 20.0),
              _round("a", 2, 50.0)]  # the last pair is not complete
    assert pair_ratios(rounds) == [3.0, 2.0]
    assert median_round(rounds).name == "b0"  # the lower median of the plan rounds
    assert median_round(rounds, "a").name == "a1"


def _plan(**extra: Any) -> dict[str, Any]:
    schedule = [{"task": 0, "node": "mm", "op": "aten::mm", "device": "cpu:1", "start_ns": 0, "end_ns": 5},
                {"task": 1, "node": "relu", "op": "aten::relu", "device": "cpu:0", "start_ns": 0, "end_ns": 2},
                {"task": 2, "node": "add", "op": "aten::add", "device": "cpu:0", "start_ns": 5, "end_ns": 6}]
    return {"schedule": schedule, "predicted_makespan_ns": 6, **extra}


def test_summary_compares_the_median_with_the_printed_range() -> None:
    rounds = [r for pair, (a, b) in enumerate([(20.0, 10.0), (19.0, 10.0), (21.0, 10.0)])
              for r in (_round("a", pair, a), _round("b", pair, b))]
    inside = summarise(rounds, "stop", _plan(speedup=2.1, speedup_range=[1.8, 2.3]), "test", ["cpu:0"])
    assert inside.speedup == 2.0 and inside.in_range and inside.overlaps
    assert inside.ci[0] <= inside.speedup <= inside.ci[1]
    assert (inside.baseline_ns, inside.plan_ns) == (20.0, 10.0)
    outside = summarise(rounds, "stop", _plan(speedup=3.0, speedup_range=[2.05, 3.5]), "test", ["cpu:0"])
    assert outside.in_range is False and outside.overlaps is True  # the interval reaches 2.1x
    far = summarise(rounds, "stop", _plan(speedup=3.0, speedup_range=[2.5, 3.5]), "test", ["cpu:0"])
    assert far.in_range is False and far.overlaps is False
    none = summarise(rounds, "stop", _plan(), "test", ["cpu:0"])
    assert none.in_range is None and none.overlaps is None and none.predicted_speedup is None


def test_the_step_predicted_is_the_one_the_report_printed() -> None:
    # reports.placement_text: "estimated with the plan" = measured_step_ns / speedup
    assert predicted_step(_plan(measured_step_ns=30_000_000.0, speedup=1.5))[0] == 20_000_000
    assert predicted_step(_plan())[0] == 6  # no recorded step (a parallelism plan): the makespan


def test_the_baseline_comes_from_plan_json_when_the_trace_is_not_there() -> None:
    moved = [{"task": 0, "from_device": "cpu:0", "to_device": "cpu:1"}]
    plan, source = baseline_plan(_plan(moved=moved), None)
    assert {row["node"]: row["device"] for row in plan["schedule"]} == {"mm": "cpu:0", "relu": "cpu:0", "add": "cpu:0"}
    assert "plan.json" in source
    parallel, _ = baseline_plan(_plan(device="cpu:0"), None)
    assert {row["device"] for row in parallel["schedule"]} == {"cpu:0"}
    with pytest.raises(AnalysisUnavailable):
        baseline_plan(_plan(), None)


def _activity(order: list[tuple[str, str]], steps: int = 3) -> Activity:
    runs = []
    for step in range(steps):
        t = step * 1_000
        for i, (name, device) in enumerate(order):
            runs.append(NodeRun(len(runs), f"aten::{name}", name, device, 1, step, t + 10 * i, t + 10 * i + 5 + step, True))
    return Activity("recorded", runs, [], [], [], {})


def test_the_baseline_comes_from_the_recorded_trace_in_its_order() -> None:
    recorded = _activity([("relu", "cpu:0"), ("mm", "cpu:0"), ("add", "cpu:0")])
    plan, source = baseline_plan(_plan(moved=[]), recorded)
    rows = sorted(plan["schedule"], key=lambda row: row["start_ns"])
    assert [(row["node"], row["device"]) for row in rows] == [("relu", "cpu:0"), ("mm", "cpu:0"), ("add", "cpu:0")]
    assert "recorded trace" in source
    partial = _activity([("relu", "cpu:0"), ("mm", "cpu:0")])  # a node missing: plan.json instead
    assert "plan.json" in baseline_plan(_plan(moved=[]), partial)[1]


def test_a_round_is_its_median_step_after_warm_up_and_must_apply_its_placement() -> None:
    activity = _activity([("relu", "cpu:0"), ("mm", "cpu:1"), ("add", "cpu:0")], steps=4)
    found = measure_round(activity, {"relu": "cpu:0", "mm": "cpu:1", "add": "cpu:0"}, "b", 2, 1.5, (0.5, 0.7), 1.9)
    assert (found.name, found.steps, found.load_before, found.load_after, found.cpu_share) == ("b2", 3, 0.5, 0.7, 1.9)
    assert found.step_ns == 27  # spans 26, 27, 28 after warm-up step 0 (25)
    with pytest.raises(AnalysisUnavailable, match="did not apply"):
        measure_round(activity, {"relu": "cpu:1", "mm": "cpu:0", "add": "cpu:1"}, "a", 0, 1.0, (0, 0), None)


def test_the_demo_says_whether_the_range_held_or_the_machine_was_too_noisy() -> None:
    from types import SimpleNamespace

    from tc_analyses.app.demo import verify_verdict

    def rounds(speedup: float, ci: tuple[float, float]) -> SimpleNamespace:
        return SimpleNamespace(speedup=speedup, ci=ci, predicted_range=(1.5, 2.0),
                               rounds=[SimpleNamespace(load_after=2.5), SimpleNamespace(load_after=3.5)])

    assert "lies inside the printed range 1.50-2.00x" in verify_verdict(rounds(1.8, (1.7, 1.9)))
    noisy = verify_verdict(rounds(1.0, (0.7, 1.4)))
    assert noisy.startswith("verdict:    the machine was too noisy to verify") and "load 2.5-3.5" in noisy
    assert "lies outside the printed range" in verify_verdict(rounds(1.0, (0.95, 1.05)))
    assert "no printed range" in verify_verdict(None)
