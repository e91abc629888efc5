"""Hardware tables for modelled costs: device peaks and link specs, and the ``--devices`` parser.

Numbers are vendor datasheet figures (dense, no sparsity), quoted from memory of the public spec
sheets; they are peaks, so modelled costs are optimistic lower bounds.

Defaults for devices given without ``=MODEL``:

* ``cpu`` -> ``CPU``: a generic x86-64 CPU with ``os.cpu_count()`` cores, each doing 32 fp32
  FLOP/cycle (two 8-lane AVX2 FMA units) at 3.0 GHz, and 51.2 GB/s of memory bandwidth (dual
  channel DDR4-3200). ``cpu=CPU-16`` names the core count explicitly.
* ``cuda:N`` -> ``A100`` (A100 SXM4 80 GB), the most common data-centre GPU.

Both set :attr:`Device.model_is_default` so reports can say the model was assumed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from tc_analyses.perf.problem import Device, Link, PlacementError

TFLOPS = 1e12
GBPS = 1e9
GB = 10**9


@dataclass(frozen=True)
class DeviceSpec:
    model: str
    kind: str  # "cpu" or "gpu"
    fp32_flops: float  # peak FLOP/s in fp32
    half_flops: float | None  # peak FLOP/s in bf16/fp16 (tensor cores, dense); None = use fp32
    mem_bandwidth: float  # bytes/s
    memory_bytes: int | None  # capacity; None = unknown (unlimited)
    launch_ns: int  # fixed cost per op: kernel launch (GPU) or op dispatch (CPU)
    nvlink: str | None = None  # key of LINKS joining two such GPUs of one host, None = PCIe only

    def peak_flops(self, dtype: str) -> float:
        half = dtype in ("float16", "bfloat16", "half")
        return self.half_flops if half and self.half_flops else self.fp32_flops


GPU_LAUNCH_NS = 5_000  # ~5 µs: a CUDA kernel launch plus framework dispatch
# The GPU kernel model as the planner charges it (roofline + GPU_LAUNCH_NS), against the kernels of
# three eager programs run on an H200 (358 ops; tests/data/traces/cuda/h200-eager, recomputed by
# tests/test_perf/test_gpu_prediction.py): p10 and p90 of predicted / measured - 1. A modelled
# GPU cost is as likely as not to be off by more than 40%; a range carries this.
GPU_MODEL_ERROR = (-0.66, 2.28)
CPU_LAUNCH_NS = 1_000  # ~1 µs: a framework op dispatch on the CPU

CPU_FLOPS_PER_CORE = 32 * 3.0e9  # 2 AVX2 FMA units x 8 fp32 lanes x 2 FLOP, at 3.0 GHz
CPU_MEM_BANDWIDTH = 51.2 * GBPS  # dual-channel DDR4-3200


def generic_cpu(cores: int) -> DeviceSpec:
    """The generic CPU of `cores` cores (fp32 only: no bf16 speed-up assumed)."""
    return DeviceSpec(f"CPU-{cores}", "cpu", cores * CPU_FLOPS_PER_CORE, None, CPU_MEM_BANDWIDTH,
                      _physical_memory(), CPU_LAUNCH_NS)


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


GPUS: dict[str, DeviceSpec] = {s.model: s for s in (
    # NVIDIA A100 SXM4 80GB datasheet: FP32 19.5 TF, BF16/FP16 tensor 312 TF, HBM2e 2,039 GB/s.
    DeviceSpec("A100", "gpu", 19.5 * TFLOPS, 312 * TFLOPS, 2039 * GBPS, 80 * GB, GPU_LAUNCH_NS, "NVLink 3"),
    # NVIDIA H100 SXM5 datasheet: FP32 67 TF, BF16/FP16 tensor 989 TF, HBM3 3.35 TB/s, 80 GB.
    DeviceSpec("H100", "gpu", 67 * TFLOPS, 989 * TFLOPS, 3350 * GBPS, 80 * GB, GPU_LAUNCH_NS, "NVLink 4"),
    # NVIDIA H200 SXM datasheet: FP32 67 TF, BF16/FP16 tensor 989 TF, HBM3e 4.8 TB/s, 141 GB.
    DeviceSpec("H200", "gpu", 67 * TFLOPS, 989 * TFLOPS, 4800 * GBPS, 141 * GB, GPU_LAUNCH_NS, "NVLink 4"),
    # NVIDIA V100 SXM2 32GB datasheet: FP32 15.7 TF, FP16 tensor 125 TF (no bf16), HBM2 900 GB/s.
    DeviceSpec("V100", "gpu", 15.7 * TFLOPS, 125 * TFLOPS, 900 * GBPS, 32 * GB, GPU_LAUNCH_NS, "NVLink 2"),
    # NVIDIA T4 datasheet: FP32 8.1 TF, FP16 tensor 65 TF, GDDR6 320 GB/s, 16 GB.
    DeviceSpec("T4", "gpu", 8.1 * TFLOPS, 65 * TFLOPS, 320 * GBPS, 16 * GB, GPU_LAUNCH_NS),
    # NVIDIA L4 datasheet: FP32 30.3 TF, BF16/FP16 tensor 121 TF (242 with sparsity), 300 GB/s, 24 GB.
    DeviceSpec("L4", "gpu", 30.3 * TFLOPS, 121 * TFLOPS, 300 * GBPS, 24 * GB, GPU_LAUNCH_NS),
    # NVIDIA RTX 4090 (Ada whitepaper): FP32 82.6 TF, BF16/FP16 tensor (fp32 acc.) 165.2 TF, 1,008 GB/s, 24 GB.
    DeviceSpec("RTX4090", "gpu", 82.6 * TFLOPS, 165.2 * TFLOPS, 1008 * GBPS, 24 * GB, GPU_LAUNCH_NS),
    # AMD Instinct MI250X datasheet: FP32 vector 47.9 TF, BF16/FP16 matrix 383 TF, HBM2e 3.2 TB/s, 128 GB.
    DeviceSpec("MI250X", "gpu", 47.9 * TFLOPS, 383 * TFLOPS, 3200 * GBPS, 128 * GB, GPU_LAUNCH_NS, "Infinity Fabric"),
)}

DEFAULT_GPU = "A100"
DEFAULT_CPU_CORES = os.cpu_count() or 8
DEFAULT_CPU = "CPU"  # resolves to generic_cpu(DEFAULT_CPU_CORES)

# Link specs: latency is a typical small-copy cost (DMA setup, driver, network stack), the
# bandwidth the per-direction spec figure.
LINKS: dict[str, Link] = {
    # PCIe 3.0 x16: 8 GT/s x 16 lanes, 128b/130b -> 15.75 GB/s per direction.
    "PCIe 3.0 x16": Link(5_000, 15.75, "link spec: PCIe 3.0 x16"),
    # PCIe 4.0 x16: 16 GT/s -> 31.5 GB/s per direction.
    "PCIe 4.0 x16": Link(5_000, 31.5, "link spec: PCIe 4.0 x16"),
    # PCIe 5.0 x16: 32 GT/s -> 63 GB/s per direction.
    "PCIe 5.0 x16": Link(5_000, 63.0, "link spec: PCIe 5.0 x16"),
    # NVLink 2 (V100): 300 GB/s total -> 150 GB/s per direction.
    "NVLink 2": Link(2_000, 150.0, "link spec: NVLink 2"),
    # NVLink 3 (A100): 600 GB/s total -> 300 GB/s per direction.
    "NVLink 3": Link(2_000, 300.0, "link spec: NVLink 3"),
    # NVLink 4 (H100/H200): 900 GB/s total -> 450 GB/s per direction.
    "NVLink 4": Link(2_000, 450.0, "link spec: NVLink 4"),
    # AMD Infinity Fabric (MI250X GPU-GPU): 100 GB/s per link direction, several links -> ~200 GB/s.
    "Infinity Fabric": Link(2_000, 200.0, "link spec: Infinity Fabric"),
    # 25 Gb Ethernet: 3.125 GB/s; ~10 µs TCP round trip.
    "25GbE": Link(10_000, 3.125, "link spec: 25 Gb Ethernet"),
    # 100 Gb Ethernet: 12.5 GB/s; ~5 µs (RoCE/TCP).
    "100GbE": Link(5_000, 12.5, "link spec: 100 Gb Ethernet"),
    # InfiniBand HDR: 200 Gb/s = 25 GB/s; ~2 µs with RDMA.
    "InfiniBand HDR": Link(2_000, 25.0, "link spec: InfiniBand HDR"),
    # Two CPU devices of one host are thread pools sharing memory: nothing is copied, but the consumer's
    # thread must wake up (a Python thread waiting on an Event runs again after a median 31-44 us on a
    # 2-core VM; bench/verify_bench.py prints it) and then take the GIL from the producer's lane, which
    # gives it up within one switch interval (50 us, tracer.graph_program.SWITCH_INTERVAL_S): 90 us,
    # and no bandwidth term.
    "thread hand-over": Link(90_000, 1e12, "link spec: thread hand-over on one host (no copy)"),
}
HOST_GPU_LINK = "PCIe 4.0 x16"  # host <-> GPU, and GPU <-> GPU without NVLink, on one host
INTER_HOST_LINK = "25GbE"  # any two devices on different hosts


def spec(model: str) -> DeviceSpec:
    """The spec of a model name (case-insensitive; ``CPU`` or ``CPU-<cores>`` for the generic CPU)."""
    upper = model.strip().upper().replace(" ", "")
    if upper == "CPU":
        return generic_cpu(DEFAULT_CPU_CORES)
    m = re.fullmatch(r"CPU-(\d+)", upper)
    if m and int(m.group(1)) > 0:
        return generic_cpu(int(m.group(1)))
    for name, s in GPUS.items():
        if name.upper() == upper:
            return s
    known = ", ".join([*GPUS, "CPU", "CPU-<cores>"])
    raise PlacementError(f"unknown device model {model!r}; known models: {known}")


def spec_of(device: Device) -> DeviceSpec:
    return spec(device.model)


def default_link(a: Device, b: Device) -> Link:
    """The link spec assumed between two devices when the trace has no copies to fit."""
    if a.host != b.host:
        return LINKS[INTER_HOST_LINK]
    sa, sb = spec_of(a), spec_of(b)
    if sa.kind == "cpu" and sb.kind == "cpu":
        return LINKS["thread hand-over"]
    if sa.kind == "gpu" and sb.kind == "gpu" and sa.nvlink and sa.nvlink == sb.nvlink:
        return LINKS[sa.nvlink]
    return LINKS[HOST_GPU_LINK]


_KINDS = ("cpu", "cuda")


def parse_devices(text: str) -> list[Device]:
    """Parse ``"cpu,cuda:0=H100,hostB:cuda:0"``: ``[host:]cpu|cuda:N[=MODEL]``, comma separated.

    A device without ``=MODEL`` gets the documented default (module docstring) and
    ``model_is_default=True``. Errors are one-line :class:`PlacementError`.
    """
    devices: list[Device] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, model = item.partition("=")
        name, model = name.strip(), model.strip()
        parts = name.split(":")
        host = "localhost"
        if parts[0] not in _KINDS and len(parts) > 1:
            host, parts = parts[0], parts[1:]
        kind = parts[0]
        valid = (kind == "cpu" and len(parts) in (1, 2)) or (kind == "cuda" and len(parts) == 2)
        if not valid or (len(parts) == 2 and not parts[1].isdigit()) or not host:
            raise PlacementError(f"bad device {item!r}: expected [host:]cpu or [host:]cuda:N, optionally =MODEL")
        if model:
            s = spec(model)
            if (s.kind == "cpu") != (kind == "cpu"):
                raise PlacementError(f"device {name!r} is a {'CPU' if kind == 'cpu' else 'GPU'} "
                                     f"but model {model!r} is not")
            model, is_default = s.model if s.kind == "gpu" else model.upper(), False
        else:
            s = spec(DEFAULT_CPU if kind == "cpu" else DEFAULT_GPU)
            model, is_default = (DEFAULT_CPU if kind == "cpu" else DEFAULT_GPU), True
        if any(d.name == name for d in devices):
            raise PlacementError(f"device {name!r} is listed twice")
        devices.append(Device(name, model, host, s.memory_bytes, is_default))
    if not devices:
        raise PlacementError("no devices given: expected e.g. 'cpu,cuda:0=H100'")
    return devices
