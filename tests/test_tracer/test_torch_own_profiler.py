"""A program that runs its own torch profiler, and record_function scopes (tracer/torch_foreign.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tc_analyses.reader.fast import read_trace  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402

pytestmark = pytest.mark.torch


def _step(model: "torch.nn.Module", x: "torch.Tensor", head: str) -> None:
    getattr(model(x), head)().sum().backward()


def test_recorder_steps_aside_for_the_programs_profiler(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with TorchRecorder(str(tmp_path / "trace")) as rec:
        _step(model, x, "tanh")  # before the block
        with torch.profiler.profile(record_shapes=True) as prof:
            with torch.profiler.record_function("user_block"):
                _step(model, x, "sigmoid")
        prof.export_chrome_trace(str(tmp_path / "user.json"))
        with torch.autograd.profiler.profile() as legacy:  # the older API: stepped aside for too
            _step(model, x, "relu")
        _step(model, x, "exp")  # after it
    ops = Counter(read_trace(tmp_path / "trace").table("node_begin").text("op").tolist())
    assert ops["aten::tanh"] == 1 and ops["aten::exp"] == 1  # before and after are recorded
    assert ops["aten::sigmoid"] == 0 and ops["aten::relu"] == 0  # inside: in the program's profiles
    user = {e["name"] for e in json.loads((tmp_path / "user.json").read_text())["traceEvents"]}
    assert {"user_block", "aten::sigmoid"} <= user  # the program's profile is whole
    assert any(e.name == "aten::relu" for e in legacy.function_events)
    assert capfd.readouterr().err.count("started its own torch profiler") == 1
    assert rec.windows_lost == 0


def test_a_scheduled_program_profiler_leaves_its_wait_steps_to_us(tmp_path: Path) -> None:
    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    heads = ["tanh", "sigmoid", "exp"]
    with TorchRecorder(str(tmp_path / "trace")):
        schedule = torch.profiler.schedule(wait=1, warmup=0, active=1, repeat=1)
        with torch.profiler.profile(schedule=schedule) as prof:
            for head in heads:  # wait (ours), active (the program's), done (ours again)
                _step(model, x, head)
                prof.step()
    ops = Counter(read_trace(tmp_path / "trace").table("node_begin").text("op").tolist())
    assert ops["aten::tanh"] == 1 and ops["aten::exp"] == 1 and ops["aten::sigmoid"] == 0
    assert any(e.name == "aten::sigmoid" for e in prof.events())


def test_record_function_scopes_are_annotations(tmp_path: Path) -> None:
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TorchRecorder(str(tmp_path / "trace")):
        for _ in range(2):
            with torch.profiler.record_function('my <forward> & "loss"'):
                loss = model(torch.randn(4, 8)).sum()
            loss.backward()
            opt.step()
    trace = read_trace(tmp_path / "trace")
    names = Counter(trace.table("annotation_begin").text("name").tolist())
    assert names['my <forward> & "loss"'] == 2
    assert names["Optimizer.step#SGD.step"] == 2
    begin, end = trace.table("annotation_begin"), trace.table("annotation_end")
    assert sorted(begin["annotation_id"].tolist()) == sorted(end["annotation_id"].tolist())


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain steps", "steps in record_function"])
def test_windows_end_during_the_run_but_never_inside_a_record_function(tmp_path: Path, wrapped: bool) -> None:
    """Streaming keeps memory to one window and a killed program's loss to one step: windows must
    end while the program runs, also when each step is one record_function scope (Lightning,
    HF Trainer), yet never inside one (stopping the profiler there crashed torch)."""
    import contextlib

    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ends_inside: list[bool] = []
    with TorchRecorder(str(tmp_path / "trace"), flush_interval=0.0) as rec:
        end_window = rec._end_window

        def watched() -> None:
            assert rec._open_scopes is not None
            ends_inside.append(rec._open_scopes.open())
            end_window()

        rec._end_window = watched  # type: ignore[method-assign]
        for _ in range(4):
            with torch.profiler.record_function("train_step") if wrapped else contextlib.nullcontext():
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
        during = rec.windows_ended  # written here, or handed to converter children
    assert during >= 3, "windows no longer end while the program runs"
    assert ends_inside and not any(ends_inside)
    assert Counter(read_trace(tmp_path / "trace").table("node_begin").text("op").tolist())["aten::linear"] == 4


def test_a_program_that_records_itself_is_recorded_once(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Under `dfcompass record`, the program's own TorchRecorder(path) finds the job's session
    running: it says so in one line and writes nothing; the job's recorder keeps every op (it used
    to raise 'another dfcompass session is recording' out of the program)."""
    from tracer.session import Session

    model = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with Session(str(tmp_path / "job-trace")), TorchRecorder(None) as outer:
        _step(model, x, "tanh")
        with TorchRecorder(str(tmp_path / "own"), active=1) as inner:
            _step(model, x, "sigmoid")
            inner.step()
        _step(model, x, "exp")
    assert "is not recording: this process is already recorded into" in capfd.readouterr().err
    assert not (tmp_path / "own").exists() and inner.nodes_recorded == 0
    ops = Counter(read_trace(tmp_path / "job-trace").table("node_begin").text("op").tolist())
    assert ops["aten::tanh"] == ops["aten::sigmoid"] == ops["aten::exp"] == 1
    assert outer.nodes_recorded > 0
    # A recorder on a session it did not start (the job's) still notes the thread settings
    env = read_trace(tmp_path / "job-trace").metadata.env
    assert int(env["torch_num_threads"]) == torch.get_num_threads()
    assert int(env["torch_interop_threads"]) == torch.get_num_interop_threads()
