"""dfcompass verify: the program run under its recorded placement and under the plan, in interleaved
rounds, and compared: the speedup, per step and per node.

The programs really run (two CPU lanes, the same code path a GPU plan takes), so the timings are
this machine's: the tests check what the comparison is made of, not how close it comes (the bench
reports that, bench/verify_bench.py). Not even the one-lane plan's 1.00x is asserted: on a shared
2-core machine three pairs of rounds can measure 1.3x and more (tests/test_placement/test_verify_rounds.py
checks the rounds' statistics on synthetic numbers).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses.placement.verify import warmup_steps
from tc_analyses.inputs import TraceInputs
from tests.helpers import subprocess_env

pytestmark = [pytest.mark.torch, pytest.mark.slow]
pytest.importorskip("torch")

PROGRAM = ["python", "-m", "tracer.workloads.graph_programs", "branchy-mlp", "--steps", "6"]
PAIRS = ["--rounds", "3", "--max-rounds", "3"]  # fewer than verify's default 5: the tests check the figures' making


def _run(exe: list[str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*exe, *map(str, args)], capture_output=True, text=True, env=subprocess_env(), timeout=300)


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory, dfcompass_exe: list[str]) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("verify")
    base = _run(dfcompass_exe, "record", "--no-torch", "-o", work / "base", "--", *PROGRAM)
    assert base.returncode == 0, base.stderr
    plan = _run(dfcompass_exe, "recommend-placement", work / "base", "--devices", "cpu:0,cpu:1", "-o", work / "plan")
    assert plan.returncode == 0, plan.stderr
    out = _run(dfcompass_exe, "verify", work / "plan", "-o", work / "rerun", "--refit", "--format", "json",
               *PAIRS, "--", *PROGRAM)
    assert out.returncode == 0, out.stderr
    return {"work": work, "plan": json.loads((work / "plan" / "plan.json").read_text()),
            "result": json.loads(out.stdout)}


def _kept_median(trace: Path | str) -> float:
    runs: dict[int, list[int]] = {}
    for r in TraceInputs(Path(trace)).activity.nodes:
        runs.setdefault(r.step, []).extend((r.start, r.end))
    steps = sorted(runs)
    return statistics.median(max(runs[s]) - min(runs[s]) for s in steps if s not in warmup_steps(steps))


def test_rounds_alternate_the_recorded_placement_and_the_plan(verified: dict[str, Any]) -> None:
    plan = {row["node"]: row["device"] for row in verified["plan"]["schedule"]}
    rounds = verified["result"]["rounds"]
    assert [r["name"] for r in rounds["rounds"]] == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert rounds["baseline_devices"] == ["cpu:0"] and "recorded trace" in rounds["baseline"]
    for r in rounds["rounds"]:
        ran = TraceInputs(Path(r["trace"])).activity.nodes
        if r["side"] == "a":  # the baseline: every node where the sequential recording ran it
            assert {n.device for n in ran} == {"cpu:0"}
        else:
            assert all(plan[n.name] == n.device for n in ran) and {n.device for n in ran} == {"cpu:0", "cpu:1"}
        assert r["step_ns"] == _kept_median(r["trace"])
        assert r["load_before"] >= 0 and r["load_after"] >= 0 and r["cpu_share"] > 0
    assert verified["result"]["devices"] == ["cpu:0", "cpu:1"]


def test_the_speedup_is_measured_from_both_sides_with_its_interval(verified: dict[str, Any]) -> None:
    result, plan = verified["result"], verified["plan"]
    rounds = result["rounds"]
    steps = {r["name"]: r["step_ns"] for r in rounds["rounds"]}
    ratios = [steps[f"a{i}"] / steps[f"b{i}"] for i in range(3)]
    assert rounds["ratios"] == pytest.approx(ratios)
    assert result["measured_speedup"] == rounds["speedup"] == pytest.approx(statistics.median(ratios))
    low, high = rounds["ci"]
    assert low <= rounds["speedup"] <= high and rounds["confidence"] == 0.9
    # the recorded trace is never the baseline: the baseline is what the A rounds measured
    assert rounds["baseline_ns"] == statistics.median(steps[f"a{i}"] for i in range(3))
    assert result["recorded_step_ns"] == plan["measured_step_ns"]
    assert result["predicted_speedup"] == rounds["predicted_speedup"] == plan["speedup"]
    assert rounds["predicted_range"] == plan["speedup_range"]
    assert rounds["in_range"] == (plan["speedup_range"][0] <= rounds["speedup"] <= plan["speedup_range"][1])


def test_the_step_predicted_is_the_one_the_plan_s_report_printed(verified: dict[str, Any]) -> None:
    result, plan = verified["result"], verified["plan"]
    printed = re.search(r"estimated with the plan ([0-9.]+) ms", (verified["work"] / "plan" / "report.txt").read_text())
    assert printed is not None
    assert result["predicted_ns"] / 1e6 == pytest.approx(float(printed.group(1)), abs=0.0005)
    assert result["predicted_ns"] == round(plan["measured_step_ns"] / plan["speedup"])
    assert result["makespan_ns"] == plan["predicted_makespan_ns"]


def test_steps_are_those_of_the_median_plan_round(verified: dict[str, Any]) -> None:
    result = verified["result"]
    plan_rounds = sorted((r for r in result["rounds"]["rounds"] if r["side"] == "b"), key=lambda r: r["step_ns"])
    median = plan_rounds[1]
    assert Path(result["rerun"]).parent == Path(median["trace"])
    rerun = TraceInputs(Path(median["trace"])).activity
    spans: dict[int, list[int]] = {}
    for r in rerun.nodes:
        spans.setdefault(r.step, []).append(r.start)
        spans[r.step].append(r.end)
    assert [s["step"] for s in result["steps"]] == sorted(spans)
    for row in result["steps"]:
        assert row["measured_ns"] == max(spans[row["step"]]) - min(spans[row["step"]])
        assert row["predicted_ns"] == result["predicted_ns"]
        assert row["warmup"] == (row["step"] in warmup_steps(list(spans)))
    kept = [row["measured_ns"] for row in result["steps"] if not row["warmup"]]
    assert result["measured_ns"] == statistics.median(kept) == median["step_ns"]
    assert result["error"] == pytest.approx((result["predicted_ns"] - result["measured_ns"]) / result["measured_ns"])


def test_every_node_is_compared(verified: dict[str, Any]) -> None:
    nodes = verified["result"]["nodes"]
    assert {n["node"] for n in nodes} == {row["node"] for row in verified["plan"]["schedule"]}
    assert all(n["measured_ns"] > 0 for n in nodes)


def test_the_refit_is_checked_on_steps_it_did_not_see(verified: dict[str, Any]) -> None:
    refit = verified["result"]["refit"]
    kept = [row["step"] for row in verified["result"]["steps"] if not row["warmup"]]
    assert set(refit["calibration_steps"]).isdisjoint(refit["heldout_steps"])
    assert sorted(refit["calibration_steps"] + refit["heldout_steps"]) == kept
    assert refit["predicted_ns"] > 0 and refit["measured_ns"] > 0


def test_the_plot_and_text_are_written(verified: dict[str, Any]) -> None:
    out = verified["work"] / "rerun"
    assert (out / "verify.png").stat().st_size > 0 and (out / "verify.svg").stat().st_size > 0
    text = (out / "verify.txt").read_text()
    assert "predicted" in text and "warm-up" in text and "per round" in text and "90% interval" in text
    assert (out / "baseline-plan.json").is_file()


def test_rounds_already_there_are_kept_without_overwrite(verified: dict[str, Any], dfcompass_exe: list[str]) -> None:
    out = _run(dfcompass_exe, "verify", verified["work"] / "plan", "-o", verified["work"] / "rerun", "--", *PROGRAM)
    assert out.returncode != 0 and "--overwrite" in out.stderr and "Traceback" not in out.stderr


def test_a_program_that_ignores_the_plan_is_a_one_line_error(verified: dict[str, Any], dfcompass_exe: list[str],
                                                             tmp_path: Path) -> None:
    out = _run(dfcompass_exe, "verify", verified["work"] / "plan", "-o", tmp_path / "v", "--",
               "python", "-m", "tracer.workloads.pipeline", "--steps", "3")
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("dfcompass:")]  # after the program's own output
    assert len(errors) == 1 and "did not apply the plan" in errors[0] and "Traceback" not in out.stderr, out.stderr


def test_one_device_plans_predict_no_speedup_and_are_measured_against_the_recorded_placement(
        verified: dict[str, Any], dfcompass_exe: list[str]) -> None:
    """The sequential sanity case: one lane, nothing to overlap. What it measures is this machine's
    (1.01x, 90% interval 0.95-1.24x over 15 pairs at a load of 4 on 2 cores): not asserted."""
    work = verified["work"]
    out = _run(dfcompass_exe, "recommend-placement", work / "base", "--devices", "cpu:0", "-o", work / "plan1",
               "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["speedup"] == 1.0
    checked = _run(dfcompass_exe, "verify", work / "plan1", "-o", work / "seq", "--format", "json", *PAIRS,
                   "--", *PROGRAM)
    assert checked.returncode == 0, checked.stderr
    rounds = json.loads(checked.stdout)["rounds"]
    assert [r["side"] for r in rounds["rounds"]] == ["a", "b"] * 3
    assert rounds["predicted_speedup"] == 1.0 and rounds["ci"][0] <= rounds["speedup"] <= rounds["ci"][1]
    assert isinstance(rounds["in_range"], bool) and isinstance(rounds["overlaps"], bool)
    assert checked.stderr.count("verify: round ") == 6  # one line per round on stderr


def test_a_parallelism_plan_runs_and_is_verified(verified: dict[str, Any], dfcompass_exe: list[str]) -> None:
    """dfcompass parallelism writes a plan that graph programs apply: its threads are CPU lanes."""
    work = verified["work"]
    out = _run(dfcompass_exe, "parallelism", work / "base", "-o", work / "par")
    assert out.returncode == 0, out.stderr
    plan = json.loads((work / "par" / "plan.json").read_text())
    assert {row["device"] for row in plan["schedule"]} <= {f"cpu:{i}" for i in range(plan["max_streams"])}
    checked = _run(dfcompass_exe, "verify", work / "par", "-o", work / "parv", "--format", "json",
                   "--rounds", "1", "--max-rounds", "1", "--", *PROGRAM)
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert result["predicted_ns"] == plan["plan_ns"]  # no recorded step: the plan's makespan
    assert result["rounds"]["baseline_devices"] == [plan["device"]]
    assert result["measured_speedup"] == result["rounds"]["ratios"][0]  # measured by verify, not taken from a trace


def test_the_measured_step_comes_with_its_spread(verified: dict[str, Any]) -> None:
    result = verified["result"]
    kept = sorted(row["measured_ns"] for row in result["steps"] if not row["warmup"])
    low, high = result["measured_range_ns"]
    assert kept[0] <= low <= result["measured_ns"] <= high <= kept[-1]


@pytest.mark.parametrize("plan", [{"schedule": [{"node": "x"}]}, {"schedule": "nope"},
                                  {"schedule": [{"node": "add", "device": "cpu:0", "start_ns": 0, "end_ns": 1}]}])
def test_a_broken_plan_is_a_one_line_error(verified: dict[str, Any], dfcompass_exe: list[str], tmp_path: Path,
                                           plan: dict[str, Any]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    out = _run(dfcompass_exe, "verify", path, "-o", tmp_path / "v", "--", *PROGRAM)
    assert out.returncode in (1, 2) and "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("dfcompass:")]
    assert len(errors) == 1 and str(path) in errors[0], out.stderr


def test_record_stores_the_calibration_the_plan_uses_and_the_rounds_do_not_measure_it(verified: dict[str, Any]) -> None:
    work, plan = verified["work"], verified["plan"]
    calibration = json.loads((work / "base" / "calibration.json").read_text())
    assert calibration["handover_p50_ns"] > 0 and calibration["busy_contention"] >= 1.0
    links = plan["links"]
    assert "measured at record" in links["cpu:0->cpu:1"] and "measured at record" in links["cpu:1->cpu:0"]
    assert any("measured on this machine at record" in n for n in plan["notices"])
    assert "busy core" in plan["range_covers"] and plan["speedup_range"][0] <= plan["speedup"]
    rounds = [Path(r["trace"]) for r in verified["result"]["rounds"]["rounds"]]
    assert rounds and not any((r / "calibration.json").exists() for r in rounds)
