"""One model: the plan the optimiser finds is the one reported, exported and compared.

The two graph files are the repros from issue 12: on the first, the MILP's own schedule (480 us)
used to be re-simulated in another order and reported as 812 us; on the second, HiGHS's presolve
failed with "Solve error" every time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses.placement import generate, milp
from tc_analyses.analyses.placement.heft import heft, list_schedule
from tc_analyses.analyses.placement.graph_file import problem_from_graph_file
from tc_analyses.analyses.placement.recommend import recommend
from tc_analyses.perf.devices import parse_devices
from tc_analyses.perf.problem import Placement, PlacementProblem
from tests.helpers import REPO_ROOT

GRAPHS = REPO_ROOT / "tests" / "data" / "graphs"


def _problem(name: str) -> PlacementProblem:
    return problem_from_graph_file(GRAPHS / name, parse_devices("cpu,cuda:0"))


def _schedule_end(plan: Placement) -> int:
    return max(slot.end_ns for slot in plan.schedule)


def test_the_milp_plan_is_reported_as_the_milp_found_it() -> None:
    problem = _problem("milp-plan-reported.json")
    result, plan = recommend(problem, "g")
    assert result.algorithm == "milp"
    assert result.predicted_makespan_ns == plan.makespan_ns == _schedule_end(plan) == 480_000
    # The same model judges the candidates: HEFT's plan is not better under it.
    assert heft(problem).makespan_ns >= plan.makespan_ns


def test_a_presolve_solve_error_is_retried_without_presolve() -> None:
    exact = milp.solve(_problem("highs-presolve-error.json"))
    assert exact.placement is not None and exact.optimal, exact.reason
    result, plan = recommend(_problem("highs-presolve-error.json"), "g")
    assert result.algorithm == "milp" and plan.makespan_ns == 250_000
    assert not any("MILP" in n for n in result.notices)


def test_a_solver_failure_falls_back_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failed:
        x, status, message = None, milp.HIGHS_SOLVE_ERROR, "(HiGHS Status 4: Solve error)"

    monkeypatch.setattr(milp, "_solve_quietly", lambda *args: Failed())
    result, plan = recommend(_problem("milp-plan-reported.json"), "g")
    assert result.algorithm.startswith("heft")
    (notice,) = [n for n in result.notices if "MILP" in n]
    assert "\n" not in notice and "Solve error" in notice and "HEFT" in notice
    assert result.predicted_makespan_ns == _schedule_end(plan)


@pytest.mark.parametrize("seed", range(6))
def test_reported_figures_are_the_optimisers_schedule(seed: int) -> None:
    problem = (generate.random_layered(8, 2, seed) if seed % 2 else generate.fork_join(2, 3, 2, seed))
    # Every task ran on the first device, so there is an actual placement to compare with.
    problem.tasks = [replace(task, actual_device=problem.devices[0].name) for task in problem.tasks]
    result, plan = recommend(problem, "generated")
    assert result.predicted_makespan_ns == plan.makespan_ns == _schedule_end(plan)
    assert plan.makespan_ns <= heft(problem).makespan_ns
    actual = list_schedule(problem, {t.id: problem.devices[0].name for t in problem.tasks})
    assert result.actual_makespan_ns == actual.makespan_ns
    assert result.speedup == pytest.approx(actual.makespan_ns / plan.makespan_ns)


def test_solver_output_never_reaches_stdout() -> None:
    # HiGHS writes from C++ to file descriptor 1; whatever writes there while it runs is dropped.
    code = ("import os; from tc_analyses.analyses.placement.milp import _stdout_silenced\n"
            "with _stdout_silenced():\n    os.write(1, b'solver noise\\n')\nprint('{\"ok\": 1}')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert json.loads(done.stdout) == {"ok": 1}


def test_recommend_placement_json_is_json_when_the_milp_runs(cli: Any, tmp_path: Path) -> None:
    result = cli("recommend-placement", GRAPHS / "milp-plan-reported.json", "--devices", "cpu,cuda:0",
                 "-o", tmp_path / "out", "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["algorithm"] == "milp" and data["predicted_makespan_ns"] == 480_000
