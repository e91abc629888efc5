"""Advice in the words of the framework that made the trace: no torch.utils.checkpoint on a
TensorFlow trace (issue 33).

The framework comes from what the recorder wrote: PyTorch's and TensorFlow's sources note their
thread settings in the metadata (``torch_num_threads``, ``tf_intra_op_threads``); a trace without
either (an import, the dataflow API) is told by its op names (``aten::`` is PyTorch's). Each analysis
builds its advice from :data:`_ADVICE` through :func:`advice`, in the framework's words from the start.
"""

from __future__ import annotations

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
    # Fusion and graph capture (launches, overhead, critical path, sequences, parallelism). TensorFlow
    # has no user-facing CUDA graphs: a tf.function compiled by XLA is what cuts its dispatches.
    "fuse": {
        PYTORCH: "torch.compile",
        TENSORFLOW: "XLA (tf.function(jit_compile=True))",
        OTHER: "a fusing compiler",
    },
    "fuse_module": {
        PYTORCH: "torch.compile the module",
        TENSORFLOW: "compile the step with XLA (tf.function(jit_compile=True))",
        OTHER: "compile the module with a fusing compiler",
    },
    "fused_optimizers": {
        PYTORCH: "foreach/fused optimizers",
        TENSORFLOW: "fused optimizer kernels",
        OTHER: "fused optimizer kernels",
    },
    "graph_capture": {
        PYTORCH: "a CUDA graph",
        TENSORFLOW: "a tf.function graph compiled with XLA",
        OTHER: "a device graph",
    },
    "graph_captures": {
        PYTORCH: "CUDA graphs",
        TENSORFLOW: "tf.function graphs compiled with XLA",
        OTHER: "device graphs",
    },
    # Both at once, so that TensorFlow's words (where both are XLA) are not said twice.
    "capture_or_fuse": {
        PYTORCH: "CUDA graphs or torch.compile",
        TENSORFLOW: "XLA (tf.function(jit_compile=True))",
        OTHER: "captured device graphs or a fusing compiler",
    },
    "fuse_and_capture": {
        PYTORCH: "torch.compile, CUDA graphs",
        TENSORFLOW: "XLA (tf.function(jit_compile=True))",
        OTHER: "a fusing compiler, captured device graphs",
    },
    # Intra-op threads (roofline, parallelism); "set_intra_op_threads" takes the count as {n}.
    "intra_op_threads": {
        PYTORCH: "torch.set_num_threads",
        TENSORFLOW: "tf.config.threading.set_intra_op_parallelism_threads",
        OTHER: "the framework's intra-op thread setting",
    },
    "thread_counts": {
        PYTORCH: "several torch.set_num_threads values",
        TENSORFLOW: "several tf.config.threading.set_intra_op_parallelism_threads values",
        OTHER: "several intra-op thread counts (the framework's intra-op thread setting)",
    },
    "set_intra_op_threads": {
        PYTORCH: "torch.set_num_threads({n})",
        TENSORFLOW: "tf.config.threading.set_intra_op_parallelism_threads({n})",
        OTHER: "{n} threads with the framework's intra-op thread setting",
    },
    # How to run a thread plan's chains side by side (parallelism, CPU lanes).
    "thread_chains": {
        PYTORCH: "run each chain as a torch.jit.fork task inside a torch.jit.script function (in eager Python "
                 "torch.jit.fork runs inline, in order), or on threads of a pool",
        TENSORFLOW: "put the chains in one tf.function, whose independent ops TensorFlow runs side by side on its "
                    "inter-op pool (tf.config.threading.set_inter_op_parallelism_threads), or run them on threads "
                    "of a pool",
        OTHER: "run each chain as a task of the framework's inter-op thread pool, or on threads of a pool",
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
