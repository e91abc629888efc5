"""A synthetic GPU training trace (generated, not recorded) that feeds every seed analysis.

No GPU is needed to benchmark the seed analyses, so the trace is built with
:class:`tracer.builder.TraceBuilder`: steps of framework ops, each with its input shapes, a
tensor edge from the previous op, a ``cudaLaunchKernel`` call and its kernel on one of two
streams; every tenth op also uploads a pageable buffer (``cudaMemcpyAsync`` and an HtoD copy),
launches a second kernel (so it issues three GPU operations, a sequence the kernel-sequence
analysis finds) and allocates and frees device memory. Durations vary with a fixed seed, so host-bound and
GPU-bound stretches both occur.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from tracer.builder import TraceBuilder

GENERATOR_VERSION = 2
OPS_PER_STEP = 1_000
EVENTS_PER_OP = 9.0  # node 2, args 1, edge 1, launch 2, kernel 2; a tenth of the ops add 10


def _manifest(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def generate(path: Path, steps: int, seed: int = 7) -> int:
    """Write the trace; returns its number of events (string and device definitions excluded)."""
    rng = random.Random(seed)
    events, ts, node, corr, in_use = 0, 1_000_000, 0, 1, 0
    with TraceBuilder(path, clock_offset_ns=0, overwrite=True) as b:
        cpu, gpu = b.device("cpu", 10), b.device("cuda:0", 10, "H100")
        gpu_free = 0
        for step in range(steps):
            b.add("step_begin", "1", ts, step, 1)
            for i in range(OPS_PER_STEP):
                m = 64 * (1 + i % 8)
                dispatch, kernel = rng.randint(3_000, 12_000), rng.randint(1_000, 40_000)
                b.add("node_begin", "1", ts, node, "aten::mm", f"layer{i}.mm", cpu, 1, step)
                b.add("node_args", "1", ts + 1, node, f"[[{m}, 256], [256, 256]]", "float32,float32")
                if i:
                    b.add("tensor_edge", "1", ts + 1, node - 1, node, node, m * 256 * 4, cpu, cpu)
                launch = ts + dispatch
                b.add("api_enter", "1", launch, 1, "cudaLaunchKernel", corr)
                b.add("api_exit", "1", launch + 2_000, 1, "cudaLaunchKernel", corr)
                start = max(launch + 4_000, gpu_free)
                b.add("kernel_begin", "gpu", start, gpu, 7 + i % 2 * 13, corr, "gemm", 1, 1, 1, 128, 1, 1)
                b.add("kernel_end", "gpu", start + kernel, gpu, 7 + i % 2 * 13, corr)
                gpu_free, corr, events = start + kernel, corr + 1, events + 8 - (i == 0)
                ts = launch + 2_500
                if i % 10 == 0:
                    b.add("api_enter", "1", ts, 1, "cudaMemcpyAsync", corr)
                    b.add("api_exit", "1", ts + 3_000, 1, "cudaMemcpyAsync", corr)
                    b.add("memcpy_begin", "gpu", max(ts + 1_000, gpu_free), gpu, 7, corr, 65_536,
                          "HtoD pageable", cpu, gpu)
                    b.add("memcpy_end", "gpu", max(ts + 1_000, gpu_free) + 9_000, gpu, 7, corr)
                    in_use += 1 << 20
                    b.add("mem_alloc", "1", ts + 100, gpu, 0x7000_0000 + node, 1 << 20, in_use)
                    in_use -= 1 << 20
                    b.add("mem_free", "1", ts + 2_900, gpu, 0x7000_0000 + node, 1 << 20, in_use)
                    corr, ts = corr + 1, ts + 3_000
                    b.add("api_enter", "1", ts, 1, "cudaLaunchKernel", corr)
                    b.add("api_exit", "1", ts + 2_000, 1, "cudaLaunchKernel", corr)
                    start = max(ts + 4_000, gpu_free)
                    b.add("kernel_begin", "gpu", start, gpu, 7, corr, "bias_add", 1, 1, 1, 128, 1, 1)
                    b.add("kernel_end", "gpu", start + 2_000, gpu, 7, corr)
                    gpu_free, corr, ts, events = start + 2_000, corr + 1, ts + 2_500, events + 10
                b.add("node_end", "1", ts, node, cpu, 1)
                node, ts = node + 1, ts + 500
            b.add("step_end", "1", ts, step, 1)
            events += 2
    return events


def ensure_gpu_trace(path: Path, total_events: int) -> int:
    """Reuse the trace at `path` when it matches this generator and size; else generate it."""
    steps = max(2, round(total_events / (OPS_PER_STEP * EVENTS_PER_OP)))
    manifest = _manifest(path)
    try:
        known = json.loads(manifest.read_text())
        if known.get("generator_version") == GENERATOR_VERSION and known.get("steps") == steps and path.is_dir():
            return int(known["events"])
    except (OSError, ValueError, KeyError):
        pass
    shutil.rmtree(path, ignore_errors=True)
    events = generate(path, steps)
    manifest.write_text(json.dumps({"generator_version": GENERATOR_VERSION, "steps": steps, "events": events}) + "\n")
    return events
