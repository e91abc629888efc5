"""Kineto fields to dfcompass values, shared by the importer's two paths (columns and checked)."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from tracer.copy_kinds import copy_ends as host_device_ends
from tracer.importers.kineto_source import U32_MAX, as_int, unsigned

MAX_TIME_NS = 2**62  # a time or duration past this (146 years) is no real trace; CTF clocks are 64-bit

# The stream of a cuda_sync that waits for the whole device (context and event syncs): no queue.
DEVICE_WIDE_STREAM = -1
# Categories read as another's: Kineto's first files (PyTorch 1.8-1.9, the TensorBoard plugin's
# era) under today's names (the events are otherwise the same: a correlation id on calls and
# activities), and MTIA's runtime calls as runtime calls.
CATEGORY_ALIASES = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
                    "Memset": "gpu_memset", "mtia_runtime": "cuda_runtime"}
# MTIA's command processor events: the device's own work, on the device the pid names. A slice
# named dma_* is a DMA transfer (args.direction, args.size), event_wait a queue waiting for another
# (args.wait_on_stream, as CUDA's Stream Wait Event), any other a kernel (args.correlation ties it
# to its runFunction call); args.stream is the queue, the tid where a DMA gives none.
MTIA_DEVICE_CATEGORIES = frozenset({"mtia_ccp_events"})
MTIA_QUEUE_WAIT = "event_wait"
_MTIA_DIRECTIONS = {"HOST_TO_DEVICE": "HtoD", "DEVICE_TO_HOST": "DtoH", "DEVICE_TO_DEVICE": "DtoD",
                    "HOST_TO_HOST": "HtoH"}


def is_mtia_transfer(name: str) -> bool:
    return name.startswith("dma")


def mtia_copy_kind(direction: Any) -> str:
    """The copy_kind of an MTIA DMA request's args.direction ("DEVICE_TO_HOST" -> "DtoH")."""
    return _MTIA_DIRECTIONS.get(direction, "Unknown") if isinstance(direction, str) else "Unknown"


def measured_end(begin: int, end: int, nbytes: Any, gbps: Any, next_starts: Sequence[int] = ()) -> int:
    """A copy's or memset's end (Kineto ns) with the duration Kineto measured, where its file rounds it.

    A file in whole µs floors each duration, but writes each copy's "memory bandwidth (GB/s)"
    computed on the exact ns: bytes / GB/s gives it back (a 1.6 µs copy written as 1 µs runs at
    0.62 of the rate its bytes over 1 µs give). Used where the slice starts on a whole µs, its
    duration is whole µs and the exact one floors to it; elsewhere the file's end stays. The start
    is the file's, so a whole-µs reading of the end is still the file's. `next_starts`: the sorted
    starts of the GPU work of the slice's queue; the floored start of the next one may come before
    the exact end, and a queue runs one thing at a time: the end stops there (not before the file's)."""
    rate, size, duration = _positive(gbps), _positive(nbytes), end - begin
    if not rate or not size or begin % 1000 or duration % 1000:
        return end
    ratio = size / rate
    if not math.isfinite(ratio):  # a subnormal rate: no duration floors to it
        return end
    exact = round(ratio)
    if not duration <= exact < duration + 1000:
        return end
    at = bisect_right(next_starts, begin)
    following = next_starts[at] if at < len(next_starts) else None
    return begin + exact if following is None or begin + exact <= following else max(end, following)


def _positive(value: Any) -> float:
    """A finite positive number as float, else 0 (a missing or odd "bytes" or GB/s)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return number if 0 < number < 1e30 else 0.0


def _milli(value: Any) -> int:
    """A non-negative number as thousandths, in 32 bits (0 when absent or out of range)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0
    return int(round(number * 1000)) if 0 <= number * 1000 < U32_MAX else 0


def kernel_config(args: dict[str, Any]) -> tuple[int, int, int, int, int] | None:
    """(registers, shared memory, blocks/SM x1000, warps/SM x1000, occupancy %) from a kernel's args;
    None when the file gives none of them."""
    keys = ("registers per thread", "shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %")
    if not any(k in args for k in keys):
        return None
    occupancy = as_int(args.get("est. achieved occupancy %"))
    return (unsigned(args.get("registers per thread"), U32_MAX), unsigned(args.get("shared memory"), U32_MAX),
            _milli(args.get("blocks per SM")), _milli(args.get("warps per SM")),
            occupancy if occupancy is not None and 0 <= occupancy <= 100 else U32_MAX)


def kernel_dims(value: Any) -> list[int]:
    """A kernel's [x, y, z] grid or block size; zeros when the file does not give it."""
    if isinstance(value, list) and len(value) == 3:
        return [unsigned(v, U32_MAX) for v in value]
    return [0, 0, 0]


# Kineto's "Input type" names (C++ type names) -> the dtype names dfc:node_args uses (torch's).
_DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
           "long int": "int64", "long": "int64", "int": "int32", "short int": "int16", "short": "int16",
           "signed char": "int8", "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
           "c10::complex<double>": "complex128"}


def input_args(args: dict[str, Any]) -> tuple[str, str] | None:
    """(shapes, dtypes) text of dfc:node_args from a cpu_op's "Input Dims" and "Input type"; None
    without dims. A non-tensor argument (a scalar, a list of tensors) has the shape []."""
    dims = args.get("Input Dims")
    if not isinstance(dims, list):
        return None
    shapes = [[int(d) for d in dim] if isinstance(dim, list) and dim and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dim) else [] for dim in dims]
    types = args.get("Input type")
    names = [str(t) for t in types] if isinstance(types, list) else []
    dtypes = [_DTYPES.get(names[i], "") if i < len(names) and shapes[i] else "" for i in range(len(shapes))]
    return str(shapes), ",".join(dtypes)


STEP = re.compile(r"^ProfilerStep#(\d+)$")  # the profiler's step marker
STREAM_NAME = re.compile(r"^stream\s+(\d+)\s*$")  # older Kineto writes GPU tids as "stream 7"
# c10::DeviceType values that [memory] events carry in "Device Type".
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia"}


def is_id(value: Any) -> bool:
    """A value a pid or tid can be (a number, a string or missing), not a list, object or bool."""
    return not isinstance(value, (bool, list, dict))


def step_number(name: str) -> int | None:
    """N for a slice named ProfilerStep#N, else None."""
    match = STEP.match(name)
    return int(match.group(1)) if match else None


def memory_device(device_type: int | None, ordinal: int | None) -> str:
    """The device a [memory] event names: "cpu", "cuda:0", "cuda" (no ordinal), "device_type42"..."""
    kind = DEVICE_TYPES.get(device_type, f"device_type{device_type}") if device_type is not None else "cpu"
    return kind if kind == "cpu" or ordinal is None or ordinal < 0 else f"{kind}:{ordinal}"


def copy_ends(direction: str, device: str, from_device: Any, to_device: Any) -> tuple[str, str]:
    """Source and destination device names of a copy: H is the host ("cpu"), D this GPU; a peer
    copy names its GPUs by fromDevice and toDevice (this GPU where one is missing)."""
    if direction == "PtoP":
        src, dst = as_int(from_device), as_int(to_device)
        return (f"cuda:{src}" if src is not None and src >= 0 else device,
                f"cuda:{dst}" if dst is not None and dst >= 0 else device)
    return host_device_ends(direction, device)
