"""`dfcompass record -- python prog.py` traces a PyTorch program with no code change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader import read_trace  # noqa: E402
from tc_analyses.reader.job import job_traces  # noqa: E402
from tracer import schema  # noqa: E402

PROGRAM = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
x = torch.randn(4, 8)
with torch.no_grad():
    for _ in range(3):
        model(x)
"""


def _record(tmp_path: Path, *env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    out = tmp_path / "trace"
    command = ["env", *env, sys.executable, "-m", "tc_analyses.cli", "record", "-o", str(out), "--", "python", str(script)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120), out


@pytest.mark.slow
def test_record_traces_torch_ops_and_edges_without_code_change(tmp_path: Path) -> None:
    done, out = _record(tmp_path)
    assert done.returncode == 0, done.stderr
    trace = read_trace(out)
    nodes = trace.table("node_begin")
    ops, names = nodes.text("op").tolist(), nodes.text("name").tolist()
    forward = [(op, name) for op, name in zip(ops, names) if name.startswith("Sequential")]
    assert forward == [("aten::linear", "Sequential.0"), ("aten::relu", "Sequential.1"),
                       ("aten::linear", "Sequential.2")] * 3
    edges = trace.table("tensor_edge")
    by_id = dict(zip(nodes["node_id"].tolist(), zip(ops, names)))
    pairs = {(by_id[p], by_id[c]) for p, c in zip(edges["producer"].tolist(), edges["consumer"].tolist())}
    assert (("aten::linear", "Sequential.0"), ("aten::relu", "Sequential.1")) in pairs
    assert (("aten::relu", "Sequential.1"), ("aten::linear", "Sequential.2")) in pairs
    assert len(trace.table("mem_alloc")) > 0
    # What recording cost the program: in the trace, and one line from `record`.
    [process] = job_traces(out)
    env: dict[str, Any] = dict(process.env)
    spent = env[schema.ENV_RECORDER_START_NS] + env[schema.ENV_RECORDER_HOOKS_NS] + env[schema.ENV_RECORDER_WINDOWS_NS]
    assert env[schema.ENV_RECORDER_STEPS] == 3  # three outermost forwards, the program's only steps
    assert env[schema.ENV_RECORDER_WINDOWS] >= 1 and env[schema.ENV_RECORDER_HOOKS_NS] > 0
    assert 0 < spent <= float(env[schema.ENV_WALL_S]) * 1e9  # within the time the process recorded
    assert env[schema.ENV_DISCARDED] == 0
    [line] = [line for line in done.stderr.splitlines() if "recording took" in line]
    assert line.startswith("dfcompass: recording took ") and "over 3 steps" in line
    assert line.endswith("; 0 events discarded")


@pytest.mark.slow
def test_dfcompass_torch_0_turns_the_torch_source_off(tmp_path: Path) -> None:
    done, out = _record(tmp_path, "DFCOMPASS_TORCH=0")
    assert done.returncode == 0, done.stderr
    assert len(read_trace(out).table("node_begin")) == 0
    assert "recording took" not in done.stderr  # no recorder of torch ops ran: no cost to tell


@pytest.mark.parametrize("handoff", ["0", "1"])
def test_a_window_that_fails_to_convert_is_lost_not_the_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capfd: pytest.CaptureFixture[str], handoff: str) -> None:
    """The profiler converts inside the user's step(), or a converter child does: an error there
    must not reach the program, and the loss is counted once the converters are done."""
    from tracer.torch_source import TorchRecorder

    monkeypatch.setenv("DFCOMPASS_HANDOFF", handoff)

    calls = []

    def broken(self: TorchRecorder, prof: object) -> None:
        calls.append(prof)
        raise AttributeError("'_ExtraFields_Kineto' object has no attribute 'sequence_number'")

    monkeypatch.setattr(TorchRecorder, "_convert_window", broken)
    with TorchRecorder(str(tmp_path / "trace"), active=2, repeat=1) as recorder:
        for _ in range(2):
            torch.ones(4).add(1)
            recorder.step()
    if handoff == "0":  # a converter child's calls are its own
        assert calls and recorder.windows_lost == len(calls)
    assert recorder.windows_lost >= 1 and recorder.windows_written == 0
    err = capfd.readouterr().err
    assert "was not recorded: AttributeError" in err
    assert len(read_trace(tmp_path / "trace").table("node_begin")) == 0  # the trace is still readable
    from tc_analyses.inputs import TraceInputs

    # and says that it lost events (at least one per window lost, the ops counted when known)
    assert TraceInputs(tmp_path / "trace").info.discarded >= recorder.windows_lost


def test_windows_end_only_at_model_forwards_outside_data_loading() -> None:
    """Stopping the profiler while the DataLoader's own record_function is open crashed torch
    (pytorch/examples' MNIST: its Normalize transform is an nn.Module called inside the fetch)."""
    from torch.utils.data import DataLoader, Dataset

    from tracer.torch_source import _may_end_window_at

    def from_forward_hook(module: torch.nn.Module) -> bool:  # the depth _ModuleScopes._pre calls it at
        return _may_end_window_at(module)

    assert from_forward_hook(torch.nn.Linear(2, 2))
    assert not from_forward_hook(torch.nn.Identity())  # no parameters: a transform, not a model
    seen: list[bool] = []

    class Items(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 2

        def __getitem__(self, index: int) -> torch.Tensor:
            seen.append(from_forward_hook(torch.nn.Linear(2, 2)))
            return torch.zeros(1)

    list(DataLoader(Items()))
    assert seen == [False, False]
