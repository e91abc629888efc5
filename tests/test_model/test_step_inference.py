"""Steps inferred from a loop's repeating op sequence, for traces without step marks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tc_analyses.inputs import TraceInputs
from tc_analyses.model.activity import Activity, NodeRun
from tc_analyses.model.step_inference import infer_steps, with_steps
from tests.helpers import subprocess_env
from tracer.schema import NO_STEP


def _activity(ops: list[str], tid: int = 7, extra: list[NodeRun] | None = None) -> Activity:
    runs = [NodeRun(i, op, op, "cpu", tid, NO_STEP, 100 * i, 100 * i + 50, True) for i, op in enumerate(ops)]
    return Activity("synthetic", runs + (extra or []), [], [], [], {})


LOOP = ["linear", "relu", "linear", "loss", "backward", "sgd"]


def test_a_repeating_loop_after_set_up_becomes_steps() -> None:
    setup = ["randn", "uniform", "uniform", "zeros"]
    activity = _activity(setup + LOOP * 5)
    inferred = infer_steps(activity)
    assert inferred is not None and inferred.period == len(LOOP) and len(inferred.windows) == 5
    stepped = with_steps(activity, inferred)
    assert [r.step for r in stepped.nodes[:len(setup)]] == [NO_STEP] * len(setup)
    for k in range(5):
        ops = [r.op for r in stepped.nodes if r.step == k]
        assert ops == LOOP, "each step starts at the iteration's first op, not at the anchor"
    assert [s.step for s in stepped.steps] == [0, 1, 2, 3, 4]


def test_many_set_up_ops_that_repeat_do_not_hide_the_loop() -> None:
    """A model's initialisation repeats per layer (init ops three times and more): with more such
    ops than the candidates first tried, the loop's once-a-step op was never reached (a recorded
    CNN planned its whole run)."""
    setup = [f"init{k}" for k in range(12) for _ in range(3)]
    activity = _activity(setup + LOOP * 6)
    inferred = infer_steps(activity)
    assert inferred is not None and inferred.period == len(LOOP) and len(inferred.windows) == 6


def test_other_threads_take_the_step_of_their_time() -> None:
    worker = [NodeRun(1000, "pool_op", "pool_op", "cpu", 9, NO_STEP, 100 * 13 + 10, 100 * 13 + 20, True)]
    activity = _activity(LOOP * 4, extra=worker)
    inferred = infer_steps(activity)
    assert inferred is not None and inferred.tid == 7
    assert with_steps(activity, inferred).nodes[-1].step == 2  # op 13 is in the third iteration


@pytest.mark.parametrize("ops", [
    ["a", "b", "c", "d", "e", "f", "g", "h"],        # nothing repeats
    LOOP * 2,                                        # two iterations: too few to call a period
    ["a", "b", "a", "c", "a", "d", "a", "e", "a"],    # an op repeats, the sequence does not
])
def test_no_period_no_steps(ops: list[str]) -> None:
    assert infer_steps(_activity(ops)) is None


@pytest.mark.torch
@pytest.mark.slow
def test_an_unmarked_pytorch_loop_gets_its_steps(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    pytest.importorskip("torch")
    program = tmp_path / "train.py"
    program.write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
        "x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))\n"
        "for _ in range(5):\n"
        "    torch.nn.functional.cross_entropy(model(x), y).backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n")
    done = subprocess.run([*dfcompass_exe, "record", "-o", tmp_path / "t", "--", "python", program],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    inputs = TraceInputs(tmp_path / "t")
    assert not inputs.activity.steps
    inferred = infer_steps(inputs.activity)
    assert inferred is not None and len(inferred.windows) == 5
    stepped = with_steps(inputs.activity, inferred)
    sequences = [[(r.op, r.name) for r in stepped.nodes if r.step == k and r.outermost] for k in range(5)]
    assert all(seq == sequences[1] for seq in sequences[1:])
    setup_ops = {r.op for r in stepped.nodes if r.step == NO_STEP}
    assert "aten::uniform_" in setup_ops  # parameter initialisation is set-up, outside every step
    from tc_analyses.model.graph import build_graph
    graph = build_graph(inputs.trace, stepped, steps=set(range(5)))
    assert not any(d.get("op") == "aten::uniform_" for _, d in graph.nodes(data=True))
    out = subprocess.run([*dfcompass_exe, "recommend-placement", tmp_path / "t", "--devices", "cpu,cuda:0",
                          "-o", tmp_path / "p"], capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "5 steps inferred from the repetition of the op sequence" in out.stdout
