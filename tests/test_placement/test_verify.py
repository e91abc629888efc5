"""dfcompass verify: a plan re-run on the program and compared, per step and per node.

The programs really run (two CPU lanes, the same code path a GPU plan takes), so the timings are
this machine's: the tests check what the comparison is made of, not how close it comes (the bench
reports that, bench/verify_bench.py).
"""

from __future__ import annotations

import json
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
               "--", *PROGRAM)
    assert out.returncode == 0, out.stderr
    return {"work": work, "plan": json.loads((work / "plan" / "plan.json").read_text()),
            "result": json.loads(out.stdout)}


def test_the_re_run_applies_the_plan(verified: dict[str, Any]) -> None:
    plan = {row["node"]: row["device"] for row in verified["plan"]["schedule"]}
    rerun = TraceInputs(verified["work"] / "rerun" / "trace").activity
    assert {r.device for r in rerun.nodes} == {"cpu:0", "cpu:1"} == set(plan.values())
    assert all(plan[r.name] == r.device for r in rerun.nodes)
    assert verified["result"]["devices"] == ["cpu:0", "cpu:1"]


def test_steps_are_measured_from_the_re_run_against_the_plan_s_makespan(verified: dict[str, Any]) -> None:
    result = verified["result"]
    rerun = TraceInputs(verified["work"] / "rerun" / "trace").activity
    spans: dict[int, list[int]] = {}
    for r in rerun.nodes:
        spans.setdefault(r.step, []).append(r.start)
        spans[r.step].append(r.end)
    assert [s["step"] for s in result["steps"]] == sorted(spans)
    for row in result["steps"]:
        assert row["measured_ns"] == max(spans[row["step"]]) - min(spans[row["step"]])
        assert row["predicted_ns"] == verified["plan"]["predicted_makespan_ns"]
        assert row["warmup"] == (row["step"] in warmup_steps(list(spans)))
    kept = [row["measured_ns"] for row in result["steps"] if not row["warmup"]]
    assert result["measured_ns"] == statistics.median(kept)
    assert result["error"] == pytest.approx((result["predicted_ns"] - result["measured_ns"]) / result["measured_ns"])


def test_speedups_compare_the_plan_s_baseline_with_the_re_run(verified: dict[str, Any]) -> None:
    result, plan = verified["result"], verified["plan"]
    assert result["predicted_speedup"] == plan["speedup"]
    assert result["measured_speedup"] == pytest.approx(plan["measured_step_ns"] / result["measured_ns"])


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
    assert "predicted" in text and "warm-up" in text


def test_a_program_that_ignores_the_plan_is_a_one_line_error(verified: dict[str, Any], dfcompass_exe: list[str],
                                                             tmp_path: Path) -> None:
    out = _run(dfcompass_exe, "verify", verified["work"] / "plan", "-o", tmp_path / "v", "--",
               "python", "-m", "tracer.workloads.pipeline", "--steps", "3")
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if line.startswith("dfcompass:")]  # after the program's own output
    assert len(errors) == 1 and "did not apply the plan" in errors[0] and "Traceback" not in out.stderr, out.stderr


def test_one_device_plans_predict_no_speedup(verified: dict[str, Any], dfcompass_exe: list[str]) -> None:
    """The sequential sanity case: one lane, nothing to overlap."""
    out = _run(dfcompass_exe, "recommend-placement", verified["work"] / "base", "--devices", "cpu:0",
               "-o", verified["work"] / "plan1", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["speedup"] == 1.0


def test_a_parallelism_plan_runs_and_is_verified(verified: dict[str, Any], dfcompass_exe: list[str]) -> None:
    """dfcompass parallelism writes a plan that graph programs apply: its threads are CPU lanes."""
    work = verified["work"]
    out = _run(dfcompass_exe, "parallelism", work / "base", "-o", work / "par")
    assert out.returncode == 0, out.stderr
    plan = json.loads((work / "par" / "plan.json").read_text())
    assert {row["device"] for row in plan["schedule"]} <= {f"cpu:{i}" for i in range(plan["max_streams"])}
    checked = _run(dfcompass_exe, "verify", work / "par", "-o", work / "parv", "--format", "json", "--", *PROGRAM)
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert result["predicted_ns"] == plan["plan_ns"]
    assert result["measured_speedup"] is None  # the parallelism plan has no measured baseline step


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
