"""The embedded PyTorch workload (tracer/workloads/torch_models.py) and `dfcompass demo` recording it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader.fast import read_trace
from tests.helpers import check_packets, check_string_defs, subprocess_env

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
torch_models = pytest.importorskip("tracer.workloads.torch_models")


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- models
def test_small_resnet_shape_and_structure() -> None:
    torch.manual_seed(0)
    model = torch_models.SmallResNet()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    blocks = [m for m in model.modules() if isinstance(m, torch_models.BasicBlock)]
    assert len(blocks) == 4
    assert sum(block.downsample is not None for block in blocks) == 1


def test_resnet18_like_shape_and_structure() -> None:
    torch.manual_seed(0)
    model = torch_models.resnet18_like().eval()
    with torch.no_grad():
        assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    stages = list(model.stages)
    assert [len(stage) for stage in stages] == [2, 2, 2, 2]
    assert [stage[0].conv1.out_channels for stage in stages] == [64, 128, 256, 512]
    params = sum(p.numel() for p in model.parameters())
    assert 11_000_000 < params < 11_300_000  # ResNet-18 for 10 classes: ~11.2M


def test_transformer_shapes() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, torch_models.SEQ, torch_models.DIM)
    assert torch_models.TransformerBlock()(x).shape == x.shape
    assert torch_models.TransformerClassifier()(x).shape == (3, 10)


def test_self_attention_matches_torch() -> None:
    torch.manual_seed(0)
    attention = torch_models.SelfAttention(32, 4)
    x = torch.randn(2, 5, 32)

    def heads(t: Any) -> Any:
        return t.reshape(2, 5, 4, 8).transpose(1, 2)

    expected = torch.nn.functional.scaled_dot_product_attention(
        heads(attention.q(x)), heads(attention.k(x)), heads(attention.v(x)))
    expected = attention.out(expected.transpose(1, 2).reshape(2, 5, 32))
    torch.testing.assert_close(attention(x), expected)


def test_tiny_mlp() -> None:
    model = torch_models.tiny_mlp()
    assert sum(isinstance(m, torch.nn.Linear) for m in model) == 20
    assert sum(isinstance(m, torch.nn.ReLU) for m in model) == 20
    assert model(torch.randn(4, 16)).shape == (4, 16)


# ---------------------------------------------------------------------------- run / record
def test_run_is_deterministic_and_calls_on_step() -> None:
    calls: list[int] = []
    first = torch_models.run(steps_infer=1, steps_train=2, batch=4, on_step=lambda: calls.append(1))
    second = torch_models.run(steps_infer=1, steps_train=2, batch=4)
    assert first == second
    assert {k: len(v) for k, v in first.items()} == {"resnet/infer": 1, "transformer/infer": 1,
                                                     "resnet/train": 2, "transformer/train": 2}
    assert len(calls) == 6
    assert torch_models.run(steps_infer=1, steps_train=2, batch=4, seed=1) != first


def test_record_writes_steps_ops_edges_and_memory(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    results = torch_models.record(str(out), steps_infer=1, steps_train=1, batch=2)
    assert results == torch_models.run(steps_infer=1, steps_train=1, batch=2)  # recording changes nothing
    trace = read_trace(out)
    nodes = trace.table("node_begin")
    assert len(nodes) > 0 and len(trace.table("node_end")) == len(nodes)
    assert len(trace.table("tensor_edge")) > 0 and len(trace.table("mem_alloc")) > 0
    assert trace.table("step_begin")["step"].tolist() == [0, 1, 2, 3]
    assert set(nodes["step"].tolist()) == {0, 1, 2, 3}  # model building is not recorded
    names = set(nodes.text("name").tolist())
    assert any(n.startswith("SmallResNet.stages") for n in names)
    assert any(n.startswith("TransformerClassifier.block.attn") for n in names)
    assert any(n.endswith("(backward)") for n in names)
    begin = dict(zip(nodes["node_id"].tolist(), nodes["timestamp"].tolist()))
    for producer, consumer in zip(trace.table("tensor_edge")["producer"].tolist(),
                                  trace.table("tensor_edge")["consumer"].tolist()):
        assert begin[producer] <= begin[consumer]  # edges point forward in time, between recorded nodes
    assert trace.discarded == 0
    check_packets(out)
    check_string_defs(trace)


@pytest.mark.slow
def test_main_refuses_an_existing_trace_without_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    command = [sys.executable, "-m", "tracer.workloads.torch_models", "--out", str(out),
               "--steps-infer", "1", "--steps-train", "1", "--batch", "2"]
    done = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tensor edges recorded" in done.stdout
    again = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert again.returncode == 2 and "--overwrite" in again.stderr and "Traceback" not in again.stderr
    assert subprocess.run([*command, "--overwrite"], capture_output=True, text=True, env=subprocess_env(),
                          timeout=120).returncode == 0


# ---------------------------------------------------------------------------- dfcompass demo
@pytest.mark.slow
def test_demo_records_the_torch_workload(tmp_path: Path, cli: Callable[..., Any]) -> None:
    out = tmp_path / "tmp"
    result = cli("demo", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert (out / "trace" / "metadata").is_file()
    info = json.loads((out / "info.json").read_text())
    counts = info["events_per_class"]
    for name in ("dfc:node_begin", "dfc:node_end", "dfc:tensor_edge", "dfc:mem_alloc", "dfc:mem_free"):
        assert counts.get(name, 0) > 0, name
    assert counts["dfc:step_begin"] == 2 * 2 + 2 * 3
    assert info["discarded"] == 0
    assert "events:" in result.stdout and "dfc:tensor_edge" in result.stdout
    assert str(out.resolve()) in result.stdout.splitlines()[-1]
    check_packets(out / "trace")
    # the rest of the pipeline: analyses tailored to the trace, and their headless summary
    assert sorted(p.name for p in (out / "analyses" / "xml").iterdir()) == [
        "dataflow.xml", "experiment.xml", "latency.xml", "memory.xml"]
    assert len(list((out / "analyses" / "plugin").glob("*.jar"))) == 1
    summary = json.loads((out / "summary.json").read_text())
    ops = [n["op"] for n in summary["top_nodes"]]
    assert "aten::conv2d" in ops and summary["memory_peak"]["cpu"] > 0
    assert "top nodes by total time:" in result.stdout
    # and the placement recommendation for a CPU plus an H100, with its views
    plan = json.loads((out / "placement" / "plan.json").read_text())
    assert plan["tasks"] > 0 and plan["predicted_makespan_ns"] > 0 and plan["replay_error"] <= 0.05
    assert (out / "placement" / "predicted" / "metadata").is_file()
    assert (out / "placement" / "views" / "xml" / "dataflow.xml").is_file()
    assert "placement on cpu,cuda:0=H100" in result.stdout
    page = (out / "report.html").read_text()  # the HTML report ends the demo, roofline plot included
    assert "<svg" in page and "Roofline" in page and "Placement on cpu,cuda:0=H100" in page
    # again into the same folder: the demo replaces its trace
    again = cli("demo", "-o", out, "--steps", "1")
    assert again.exit_code == 0, again.stderr
    assert json.loads((out / "info.json").read_text())["events_per_class"]["dfc:step_begin"] == 2 * 2 + 2 * 1


@pytest.mark.slow
def test_demo_command_line(tmp_path: Path, dfcompass_exe: list[str]) -> None:
    done = subprocess.run([*dfcompass_exe, "demo", "-o", str(tmp_path / "tmp")], capture_output=True, text=True,
                          env=subprocess_env(), timeout=600)  # a hang guard: the demo verifies a plan in rounds
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "\nverdict:    " in done.stdout  # the verified plan ends with one line on its range
    trace = read_trace(tmp_path / "tmp" / "trace")
    assert len(trace.table("node_begin")) > 0 and len(trace.table("tensor_edge")) > 0
    assert len(trace.table("mem_alloc")) > 0
    assert (tmp_path / "tmp" / "info.json").is_file()
