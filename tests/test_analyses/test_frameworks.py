"""Which framework made a trace, and advice in its words (issue 33: no torch.utils.checkpoint on a
TensorFlow trace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_analyses.analyses.frameworks import OTHER, PYTORCH, TENSORFLOW, framework_of
from tc_analyses.analyses.parallelism import plan_trace
from tc_analyses.inputs import TraceInputs
from tc_analyses.reader import read_trace
from tc_analyses.registry import BY_KEY
from tests.helpers import fork_join_cpu_trace
from tracer.builder import TraceBuilder

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACE_ANALYSES = ("launches", "overhead", "critical-path", "sequences", "roofline")

# The framework, what its recorder notes in the metadata, its op name, and words its advice must use.
FRAMEWORKS: dict[str, tuple[dict[str, str | int], str, tuple[str, ...]]] = {
    PYTORCH: ({"torch_num_threads": 1}, "aten::mm", (
        "(torch.compile, foreach/fused optimizers) or capture the loop in a CUDA graph",  # launches
        "cut dispatches with CUDA graphs or torch.compile",  # overhead, host-bound
        "with its neighbours (torch.compile) or capture the sequence in a CUDA graph",  # overhead, exposed
        "overhead (torch.compile, CUDA graphs, larger batches)",  # critical path
        "(torch.compile the module, or a fused kernel)",  # sequences
        ("try torch.set_num_threads(2); check it with a thread trajectory: record with several "
         "torch.set_num_threads values"))),  # roofline
    TENSORFLOW: ({"tf_intra_op_threads": 1}, "matmul", (
        ("(XLA (tf.function(jit_compile=True)), fused optimizer kernels) or capture the loop in a tf.function "
         "graph compiled with XLA"),
        "cut dispatches with XLA (tf.function(jit_compile=True))",
        "overhead (XLA (tf.function(jit_compile=True)), larger batches)",
        "(compile the step with XLA (tf.function(jit_compile=True)), or a fused kernel)",
        "record with several tf.config.threading.set_intra_op_parallelism_threads values")),
    OTHER: ({}, "matmul", (
        "(a fusing compiler, fused optimizer kernels) or capture the loop in a device graph",
        "cut dispatches with captured device graphs or a fusing compiler",
        "overhead (a fusing compiler, captured device graphs, larger batches)",
        "(compile the module with a fusing compiler, or a fused kernel)",
        "record with several intra-op thread counts (the framework's intra-op thread setting)")),
}


def _gpu_trace(path: Path, env: dict[str, str | int], op: str) -> Path:
    """Four host-bound 19.5 µs matmuls on one thread, no steps; each launches the same three 10 ns
    kernels with 20 ns launch calls (shorter on the GPU than their launch: fusion candidates)."""
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True, env=env) as b:
        cpu, gpu = b.device("cpu", 10), b.device("cuda:0", 10)
        for i in range(4):
            start = 1_000 + 20_000 * i
            b.add("node_begin", "1", start, i, op, "layer", cpu, 1, 0)
            b.add("node_args", "1", start + 1, i, "[[64, 64], [64, 64]]", "float32,float32")
            for k in range(3):
                corr, at = 10 * i + k + 1, start + 19_000 + 100 * k
                b.add("api_enter", "1", at, 1, "cudaLaunchKernel", corr)
                b.add("api_exit", "1", at + 20, 1, "cudaLaunchKernel", corr)
                b.add("kernel_begin", "g", at + 50, gpu, 7, corr, f"k{k}", 1, 1, 1, 32, 1, 1)
                b.add("kernel_end", "g", at + 60, gpu, 7, corr)
            b.add("node_end", "1", start + 19_500, i, cpu, 1)
    return path


def test_the_framework_comes_from_what_the_recorder_wrote() -> None:
    assert framework_of(read_trace(TRACES / "tf" / "keras-cnn")) == TENSORFLOW
    assert framework_of(read_trace(TRACES / "cuda" / "h200-eager" / "convnet-cpu" / "trace")) == PYTORCH


@pytest.mark.parametrize("framework", [PYTORCH, TENSORFLOW, OTHER])
def test_each_analysis_gives_its_advice_in_the_frameworks_words(tmp_path: Path, framework: str) -> None:
    env, op, words = FRAMEWORKS[framework]
    inputs = TraceInputs(_gpu_trace(tmp_path / "t", env, op))
    assert framework_of(inputs.trace) == framework
    texts = {key: " ".join(f.text for f in BY_KEY[key].run(inputs, {"device": "CPU-2"} if key == "roofline"
                                                               else None).findings)
             for key in TRACE_ANALYSES}
    text = " ".join(texts.values())
    missing = [w for w in words if w not in text]
    assert not missing, (missing, texts)
    if framework != PYTORCH:
        assert "torch" not in text and "CUDA graph" not in text, texts


@pytest.mark.parametrize("framework,cores,present", [
    (PYTORCH, 4, ("torch.jit.fork task inside a torch.jit.script function (in eager Python torch.jit.fork runs "
                  "inline, in order), or on threads of a pool, each with torch.set_num_threads of its share")),
    (PYTORCH, 1, "give each fewer intra-op threads (torch.set_num_threads)"),
    (TENSORFLOW, 4, "put the chains in one tf.function"),
    (TENSORFLOW, 1, "fewer intra-op threads (tf.config.threading.set_intra_op_parallelism_threads)"),
    (OTHER, 4, "each with the framework's intra-op thread setting of its share of the cores"),
    (OTHER, 1, "fewer intra-op threads (the framework's intra-op thread setting)"),
])
def test_a_thread_plan_in_the_frameworks_words(tmp_path: Path, framework: str, cores: int, present: str) -> None:
    env = FRAMEWORKS[framework][0]
    plan = plan_trace(fork_join_cpu_trace(tmp_path / "t", env=env), sync_ns=0, cores=cores)
    text = " ".join(f.text for f in plan.findings)
    assert present in text, text
    if framework != PYTORCH:
        assert "torch" not in text, text
