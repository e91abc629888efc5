"""Which framework made a trace, and advice in its words (issue 33: no torch.utils.checkpoint on a
TensorFlow trace)."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.analyses.frameworks import OTHER, PYTORCH, TENSORFLOW, framework_of, reworded
from tc_analyses.analyses.result import Finding
from tc_analyses.reader import read_trace

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_the_framework_comes_from_what_the_recorder_wrote() -> None:
    assert framework_of(read_trace(TRACES / "tf" / "keras-cnn")) == TENSORFLOW
    assert framework_of(read_trace(TRACES / "cuda" / "h200-eager" / "convnet-cpu" / "trace")) == PYTORCH


def test_pytorch_names_become_the_frameworks_own() -> None:
    advice = (Finding("cpu_bound", 5, "cut Python and framework overhead (torch.compile, CUDA graphs)"),
              Finding("launches", 0, "fuse them (torch.compile, foreach/fused optimizers)"))
    assert reworded(advice, PYTORCH) == advice
    tf = " ".join(f.text for f in reworded(advice, TENSORFLOW))
    assert "torch" not in tf and "XLA (tf.function(jit_compile=True))" in tf and "fused optimizer kernels" in tf
    other = " ".join(f.text for f in reworded(advice, OTHER))
    assert "torch" not in other and "a fusing compiler" in other
    assert [f.impact_ns for f in reworded(advice, TENSORFLOW)] == [5, 0]  # only the words change
