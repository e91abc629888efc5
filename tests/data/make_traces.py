"""Regenerate the small committed test traces under tests/data/traces/succeed/.

Deterministic: fixed uuid, clock offset, host and timestamps, so the same code writes the same
bytes (tests/test_committed_traces.py checks it). Run: .venv/bin/python tests/data/make_traces.py
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from tracer.builder import TraceBuilder

HERE = Path(__file__).resolve().parent / "traces" / "succeed"
NAMESPACE = uuid.UUID("6d8c0b5e-6f0a-4c59-9d3e-2a1f3c4b5d6e")
OFFSET = 1_763_800_000_000_000_000  # 2025-11-22, a fixed wall-clock offset


def all_classes(path: Path) -> None:
    """Two CPU threads running a 3-step dataflow that launches GPU work: every event class."""
    with TraceBuilder(path, clock_offset_ns=OFFSET, trace_uuid=uuid.uuid5(NAMESPACE, "all-classes"),
                      hostname="testhost", overwrite=True) as b:
        b.add("process_info", "100", 1_000, 100, "train.py", "testhost")
        b.add("thread_info", "100", 1_000, 100, 100, "MainThread")
        b.add("thread_info", "101", 1_000, 100, 101, "loader <&\"'> ☃")
        b.add("process_rank", "100", 1_000, 1, 1, 2, "gloo")
        cpu = b.device("cpu", 1_000)
        gpu = b.device("cuda:0", 1_000, model="H100")
        node = tensor = corr = 0
        t = 10_000
        for step in range(3):
            b.add("step_begin", "100", t, step, 100)
            b.add("annotation_begin", "100", t + 10, cpu, 100, 2 * step, "forward <&>")
            # loader thread makes a batch on the CPU
            load = node
            b.add("node_begin", "101", t + 100, load, "read", "loader.read[0]", cpu, 101, step)
            b.add("node_args", "101", t + 100, load, "[[1024]]", "int32")
            # the read also agrees on the batch with the job's other rank: a collective on an
            # existing node, so every class is here and the graph stays the one the tests know
            b.add("collective", "101", t + 100, load, 1, "all_reduce", "", 2, step, 8)
            b.add("mem_alloc", "101", t + 150, cpu, 0x1000, 4096, 4096 * (step + 1))
            b.add("node_end", "101", t + 900, load, cpu, 101)
            # main thread: copy to the GPU, then a kernel that consumes it
            copy, kern = node + 1, node + 2
            b.add("node_begin", "100", t + 1_000, copy, "aten::to", "input.to", gpu, 100, step)
            b.add("node_args", "100", t + 1_000, copy, "[[1024], []]", "int32,")
            b.add("tensor_edge", "100", t + 1_000, load, copy, tensor, 4096, cpu, gpu)
            b.add("api_enter", "100", t + 1_010, 100, "cudaMemcpyAsync", corr)
            b.add("launch", "100", t + 1_010, 100, corr)
            b.add("api_exit", "100", t + 1_050, 100, "cudaMemcpyAsync", corr)
            b.add("memcpy_begin", "gpu0-q7", t + 1_100, gpu, 7, corr, 4096, "HtoD", cpu, gpu)
            b.add("memcpy_end", "gpu0-q7", t + 1_400, gpu, 7, corr)
            b.add("node_end", "100", t + 1_060, copy, gpu, 100)
            b.add("node_begin", "100", t + 1_100, kern, "aten::relu", "model.relu (x.*+?)", gpu, 100, step)
            b.add("node_args", "100", t + 1_100, kern, "[[1024]]", "int32")
            b.add("tensor_edge", "100", t + 1_100, copy, kern, tensor + 1, 4096, gpu, gpu)
            b.add("node_link", "100", t + 1_100, copy, kern, "fwdbwd")
            b.add("api_enter", "100", t + 1_110, 100, "cudaMemsetAsync", corr + 1)
            b.add("launch", "100", t + 1_110, 100, corr + 1)
            b.add("api_exit", "100", t + 1_120, 100, "cudaMemsetAsync", corr + 1)
            b.add("memset_begin", "gpu0-q7", t + 1_450, gpu, 7, corr + 1, 512)
            b.add("memset_end", "gpu0-q7", t + 1_500, gpu, 7, corr + 1)
            b.add("api_enter", "100", t + 1_130, 100, "cudaLaunchKernel", corr + 2)
            b.add("launch", "100", t + 1_130, 100, corr + 2)
            b.add("api_exit", "100", t + 1_160, 100, "cudaLaunchKernel", corr + 2)
            b.add("kernel_begin", "gpu0-q7", t + 1_600, gpu, 7, corr + 2, "relu_kernel<float>", 16, 1, 1, 256, 1, 1)
            b.add("kernel_info", "gpu0-q7", t + 1_600, gpu, 7, corr + 2, 32, 4096, 148, 2963, 5)
            b.add("kernel_end", "gpu0-q7", t + 2_600, gpu, 7, corr + 2)
            b.add("sync_begin", "gpu0-sync", t + 2_600, gpu, 7, corr + 2, "Stream Sync", 0xFFFFFFFF, 0)
            b.add("sync_end", "gpu0-sync", t + 2_610, gpu, 7, corr + 2)
            b.add("node_end", "100", t + 1_170, kern, gpu, 100)
            b.add("mem_free", "101", t + 2_700, cpu, 0x1000, 4096, 4096 * step)

            b.add("annotation_end", "100", t + 2_990, cpu, 100, 2 * step)
            b.add("annotation_begin", "gpu0-q7", t + 1_600, gpu, 7, 2 * step + 1, "relu on the GPU")
            b.add("annotation_end", "gpu0-q7", t + 2_600, gpu, 7, 2 * step + 1)
            b.add("step_end", "100", t + 3_000, step, 100)
            node, tensor, corr, t = node + 3, tensor + 2, corr + 3, t + 10_000


TRACES = {"all-classes": all_classes}


def main(out: Path = HERE) -> None:
    for name, make in TRACES.items():
        make(out / name)
        print(f"wrote {out / name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
