"""Advice in the words of the framework that made the trace: no torch.utils.checkpoint on a
TensorFlow trace (issue 33).

The framework comes from what the recorder wrote: PyTorch's and TensorFlow's sources note their
thread settings in the metadata (``torch_num_threads``, ``tf_intra_op_threads``); a trace without
either (an import, the dataflow API) is told by its op names (``aten::`` is PyTorch's).
"""

from __future__ import annotations

from tc_analyses.analyses.result import Finding
from tc_analyses.reader.fast import DfcTrace

PYTORCH, TENSORFLOW, OTHER = "pytorch", "tensorflow", "other"

_ADVICE: dict[str, dict[str, str]] = {
    "recompute": {
        PYTORCH: "recompute activations (torch.utils.checkpoint)",
        TENSORFLOW: "recompute activations (tf.recompute_grad)",
        OTHER: "recompute activations rather than keep them",
    },
    "pin": {
        PYTORCH: "Pin the host buffer: DataLoader(pin_memory=True) or tensor.pin_memory(), then copy with "
                 ".to(device, non_blocking=True) so the copy overlaps compute.",
        TENSORFLOW: "Stage the input on the device ahead of the step: end the tf.data pipeline with "
                    "tf.data.experimental.prefetch_to_device(device), so the copy overlaps compute.",
        OTHER: "Copy from page-locked (pinned) host memory, asynchronously, so the copy overlaps compute.",
    },
    "move_once": {
        PYTORCH: "x_dev = x.to(device) before the loop, and pass x_dev to every consumer",
        TENSORFLOW: "create x_dev under tf.device(device) before the loop (tf.identity(x)), and pass x_dev to "
                    "every consumer",
        OTHER: "copy it to the device once before the loop and pass that copy to every consumer",
    },
    "create_on_device": {
        PYTORCH: "(torch.tensor(..., device=dev) or a module's register_buffer)",
        TENSORFLOW: "(a tf.constant or tf.Variable made under tf.device(dev), outside the tf.function)",
        OTHER: "",
    },
    "device_allocator": {
        PYTORCH: "keep the caching allocator on (no PYTORCH_NO_CUDA_MEMORY_CACHING), set "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation, or capture the step "
                 "in a CUDA graph (torch.cuda.graphs) so its memory is allocated once.",
        TENSORFLOW: "keep TensorFlow's BFC allocator's memory (no TF_FORCE_GPU_ALLOW_GROWTH), or compile the "
                    "step with XLA (tf.function(jit_compile=True)) so its buffers are planned once.",
        OTHER: "keep a caching allocator on the device, or capture the step as a graph so its memory is "
               "allocated once.",
    },
}


def framework_of(trace: DfcTrace) -> str:
    """PYTORCH, TENSORFLOW or OTHER, from the trace's metadata, else its op names."""
    env = trace.metadata.env
    if "torch_num_threads" in env:
        return PYTORCH
    if "tf_intra_op_threads" in env:
        return TENSORFLOW
    ops = trace.table("node_begin").text("op").tolist()[:1000]
    return PYTORCH if ops and sum(op.startswith("aten::") for op in ops) > len(ops) / 2 else OTHER


def advice(key: str, framework: str) -> str:
    """The words for `key` (a kind of advice) in `framework`'s terms."""
    words = _ADVICE[key]
    return words.get(framework, words[OTHER])


# PyTorch's names in other analyses' advice, and what a TensorFlow or other trace's user reads instead.
_WORDS: dict[str, tuple[tuple[str, str], ...]] = {
    TENSORFLOW: (("torch.compile the module", "compile the step with XLA (tf.function(jit_compile=True))"),
                 ("torch.compile", "XLA (tf.function(jit_compile=True))"),
                 ("foreach/fused optimizers", "fused optimizer kernels"),
                 ("torch.set_num_threads", "tf.config.threading.set_intra_op_parallelism_threads")),
    OTHER: (("torch.compile the module", "compile the module with a fusing compiler"),
            ("torch.compile", "a fusing compiler"),
            ("foreach/fused optimizers", "fused optimizer kernels"),
            ("torch.set_num_threads", "the framework's intra-op thread setting")),
}


def reworded(findings: tuple[Finding, ...], framework: str) -> tuple[Finding, ...]:
    """`findings` with PyTorch's names replaced by `framework`'s (kept as they are on PyTorch)."""
    from dataclasses import replace

    words = _WORDS.get(framework, ())
    if not words:
        return findings
    out = []
    for finding in findings:
        text = finding.text
        for torch_words, own in words:
            text = text.replace(torch_words, own)
        out.append(replace(finding, text=text))
    return tuple(out)
