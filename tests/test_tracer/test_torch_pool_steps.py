"""Ops on inter-op pool threads (torch.jit.fork in a scripted function) keep the step they ran in."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tc_analyses.inputs import TraceInputs
from tests.helpers import subprocess_env
from tracer.schema import NO_STEP

pytestmark = [pytest.mark.torch, pytest.mark.slow]

PROGRAM = """
import sys
import torch
torch.set_num_threads(1)
torch.set_num_interop_threads(2)  # before any parallel work
from tracer.torch_source import TorchRecorder

def chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = torch.tanh(torch.mm(x, w))
    return x

@torch.jit.script
def two_chains(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    fut = torch.jit.fork(chain, x, w)
    b = chain(x, w)
    return torch.jit.wait(fut) + b

x, w = torch.randn(128, 128), torch.randn(128, 128) * 0.05
two_chains(x, w)
with TorchRecorder(sys.argv[1], wait=0, warmup=0, active=4, repeat=1, overwrite=True) as rec:
    for _ in range(4):
        two_chains(x, w)
        rec.step()
"""


def test_pool_thread_ops_keep_their_step(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "fork.py"
    script.write_text(PROGRAM)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "t")], capture_output=True, text=True,
                          env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    activity = TraceInputs(tmp_path / "t").whole_activity
    main = Counter(r.tid for r in activity.nodes).most_common(1)[0][0]
    pool = [r for r in activity.nodes if r.tid != main]
    assert pool, "the forked chain ran on another thread"
    assert all(r.step != NO_STEP for r in pool)
    assert {r.step for r in pool} == {0, 1, 2, 3}
    for r in pool:  # each in the window of its step
        window = next(s for s in activity.steps if s.step == r.step)
        assert window.start <= r.start <= window.end


def test_ops_outside_every_step_tree_take_the_step_of_their_time() -> None:
    """An op whose tree the ProfilerStep slice does not reach (a root of another thread) gets the
    step whose window holds its start; outside every window it keeps NO_STEP."""
    torch = pytest.importorskip("torch")
    from tracer.torch_events import _Collector, _Node

    collector = _Collector(torch)
    collector.steps = [(100, 200, 0, 1), (200, 300, 1, 1)]
    for start, step in [(150, 0), (120, NO_STEP), (250, NO_STEP), (350, NO_STEP), (50, NO_STEP)]:
        collector.nodes.append(_Node(start, start + 10, 2, "aten::mm", "", "mm", step, []))
    collector.steps_by_time()
    assert [n.step for n in collector.nodes] == [0, 0, 1, NO_STEP, NO_STEP]
