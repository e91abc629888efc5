"""The dfcompass event catalogue: the one source of truth for event names, fields and types.

The CTF writer, the TSDL metadata, both readers, the docs (``docs/trace-format.md``) and the
Trace Compass templates are all derived from :data:`CATALOGUE`. Change an event here and
everything else follows; bump :data:`SCHEMA_VERSION` (major for incompatible changes).

Layout rules (see ``docs/trace-format.md`` and the CTF compatibility notes):

* Every record is fixed size except ``dfc:string_def``: strings are interned into 32-bit ids
  (``sid`` fields), so a stream of any other class is a plain array of records.
* Integers only (Trace Compass decodes floats badly), little-endian, byte aligned.
* No unsigned 8-bit arrays (Trace Compass sign-extends them) and no field name starting with
  ``_`` (babeltrace2 strips one underscore, Trace Compass does not).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

SCHEMA_VERSION: Final = (1, 2)
TRACER_NAME: Final = "dfcompass"
EVENT_PREFIX: Final = "dfc:"

# Field types: name -> (struct code, byte size, TSDL type alias, numpy dtype string).
# "sid" is a u32 index into the string table; "string" is a NUL-terminated ASCII string.
FIELD_TYPES: Final[dict[str, tuple[str, int, str, str]]] = {
    "u8": ("B", 1, "uint8_t", "<u1"),
    "u16": ("H", 2, "uint16_t", "<u2"),
    "u32": ("I", 4, "uint32_t", "<u4"),
    "u64": ("Q", 8, "uint64_t", "<u8"),
    "i64": ("q", 8, "int64_t", "<i8"),
    "sid": ("I", 4, "uint32_t", "<u4"),
    "string": ("", 0, "string", ""),
}

# Event header: u16 class id + u64 timestamp (ns on the trace clock). 10 bytes.
HEADER_FORMAT: Final = "HQ"
HEADER_SIZE: Final = struct.calcsize("<" + HEADER_FORMAT)

DEVICE_FIELDS: Final = ("device", "src_device", "dst_device")  # fields holding a device index
NO_STEP: Final = 0xFFFFFFFF  # `step` value of nodes recorded outside any step
UNKNOWN_BYTES: Final = 0  # `bytes` value when the size of a tensor is not known


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    doc: str

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name!r}: unknown type {self.type!r}")
        if self.name.startswith("_") or not self.name.isidentifier():
            raise ValueError(f"field name {self.name!r} must be an identifier without a leading '_'")


@dataclass(frozen=True)
class EventClass:
    id: int
    short: str  # name without the "dfc:" prefix; also the stream-file prefix
    fields: tuple[Field, ...]
    doc: str
    group: str
    struct_format: str = field(init=False)
    record_size: int = field(init=False)

    def __post_init__(self) -> None:
        fmt = HEADER_FORMAT + "".join(FIELD_TYPES[f.type][0] for f in self.fields)
        object.__setattr__(self, "struct_format", fmt)
        size = 0 if self.is_variable else struct.calcsize("<" + fmt)
        object.__setattr__(self, "record_size", size)

    @property
    def name(self) -> str:
        return EVENT_PREFIX + self.short

    @property
    def is_variable(self) -> bool:
        return any(f.type == "string" for f in self.fields)

    @property
    def device_positions(self) -> tuple[int, ...]:
        """Positions (in ``fields``) of the fields that hold a device index."""
        return tuple(i for i, f in enumerate(self.fields) if f.name in DEVICE_FIELDS)

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def numpy_fields(self) -> list[tuple[str, str]]:
        """(name, dtype) pairs of a whole record, header included (fixed-size classes only)."""
        if self.is_variable:
            raise ValueError(f"{self.name} has variable-size records")
        return [("id", "<u2"), ("timestamp", "<u8")] + [(f.name, FIELD_TYPES[f.type][3]) for f in self.fields]


def _f(name: str, type_: str, doc: str) -> Field:
    return Field(name, type_, doc)


_DEVICE = _f("device", "u16", "trace-local device index (see dfc:device_info)")
_TID = _f("tid", "u32", "OS thread id of the recording thread")
_QUEUE = _f("queue", "u32", "GPU queue / CUDA stream id on the device")
_CORR = _f("correlation_id", "u64", "joins a GPU activity to the runtime API call that launched it")

CATALOGUE: Final[tuple[EventClass, ...]] = (
    EventClass(0, "string_def", (
        _f("sid", "u32", "string id used by sid fields"),
        _f("value", "string", "the string, ASCII with backslash escapes (see trace-format.md)"),
    ), "Defines one entry of the string table, before its first use in time.", "strings"),
    EventClass(1, "process_info", (
        _f("pid", "u32", "OS process id"),
        _f("name", "sid", "process name (argv[0] or script)"),
        _f("hostname", "sid", "host name"),
    ), "Describes the traced process.", "descriptions"),
    EventClass(2, "thread_info", (
        _f("pid", "u32", "OS process id"),
        _TID,
        _f("name", "sid", "thread name"),
    ), "Describes a thread, when it records its first event.", "descriptions"),
    EventClass(3, "device_info", (
        _DEVICE,
        _f("name", "sid", "device name as the user wrote it, e.g. cpu, cuda:0"),
        _f("kind", "sid", "device kind: cpu, cuda, ..."),
        _f("ordinal", "u16", "index among devices of the same kind"),
        _f("model", "sid", "hardware model when known, else empty"),
    ), "Describes a device, before its first use.", "descriptions"),
    EventClass(4, "step_begin", (
        _f("step", "u32", "step number"),
        _TID,
    ), "A training or inference step starts.", "steps"),
    EventClass(5, "step_end", (
        _f("step", "u32", "step number"),
        _TID,
    ), "A step ends.", "steps"),
    EventClass(6, "node_begin", (
        _f("node_id", "u32", "execution id, unique in the trace"),
        _f("op", "sid", "operation type, e.g. aten::conv2d"),
        _f("name", "sid", "node name, e.g. layer1.0.conv1"),
        _DEVICE,
        _TID,
        _f("step", "u32", "step number, 4294967295 outside steps"),
    ), "A dataflow node starts executing.", "dataflow"),
    EventClass(7, "node_end", (
        _f("node_id", "u32", "execution id of the matching dfc:node_begin"),
        _DEVICE,
        _TID,
    ), "A dataflow node finishes.", "dataflow"),
    EventClass(8, "tensor_edge", (
        _f("producer", "u32", "node_id of the execution that produced the tensor"),
        _f("consumer", "u32", "node_id of the execution that consumes it"),
        _f("tensor_id", "u32", "tensor id, unique in the trace"),
        _f("bytes", "u64", "tensor size in bytes, 0 when unknown"),
        _f("src_device", "u16", "device of the producer"),
        _f("dst_device", "u16", "device of the consumer"),
    ), "A producer-to-consumer tensor edge, at the consumer's start.", "dataflow"),
    EventClass(9, "api_enter", (
        _TID,
        _f("name", "sid", "runtime API function, e.g. cudaLaunchKernel"),
        _CORR,
    ), "A GPU runtime API call starts.", "gpu_api"),
    EventClass(10, "api_exit", (
        _TID,
        _f("name", "sid", "runtime API function"),
        _CORR,
    ), "A GPU runtime API call returns.", "gpu_api"),
    EventClass(11, "kernel_begin", (
        _DEVICE, _QUEUE, _CORR,
        _f("name", "sid", "kernel name"),
        _f("grid_x", "u32", "grid size x"), _f("grid_y", "u32", "grid size y"), _f("grid_z", "u32", "grid size z"),
        _f("block_x", "u32", "block size x"), _f("block_y", "u32", "block size y"),
        _f("block_z", "u32", "block size z"),
    ), "A kernel starts on a GPU queue.", "gpu_activity"),
    EventClass(12, "kernel_end", (_DEVICE, _QUEUE, _CORR), "A kernel ends.", "gpu_activity"),
    EventClass(13, "memcpy_begin", (
        _DEVICE, _QUEUE, _CORR,
        _f("bytes", "u64", "bytes copied"),
        _f("copy_kind", "sid", "direction (HtoD, DtoH, DtoD, HtoH, PtoP), then the host memory when known: "
           "pageable or pinned, e.g. HtoD pageable; Unknown if not recognised"),
        _f("src_device", "u16", "source device"),
        _f("dst_device", "u16", "destination device"),
    ), "A copy starts on a GPU queue.", "gpu_activity"),
    EventClass(14, "memcpy_end", (_DEVICE, _QUEUE, _CORR), "A copy ends.", "gpu_activity"),
    EventClass(15, "memset_begin", (
        _DEVICE, _QUEUE, _CORR,
        _f("bytes", "u64", "bytes set"),
    ), "A memset starts on a GPU queue.", "gpu_activity"),
    EventClass(16, "memset_end", (_DEVICE, _QUEUE, _CORR), "A memset ends.", "gpu_activity"),
    EventClass(17, "mem_alloc", (
        _DEVICE,
        _f("addr", "u64", "address of the block"),
        _f("bytes", "u64", "bytes allocated"),
        _f("bytes_in_use", "u64", "bytes in use on the device after the allocation"),
    ), "Memory is allocated on a device (the stream file names the thread).", "memory"),
    EventClass(18, "mem_free", (
        _DEVICE,
        _f("addr", "u64", "address of the block"),
        _f("bytes", "u64", "bytes freed"),
        _f("bytes_in_use", "u64", "bytes in use on the device after the free"),
    ), "Memory is freed on a device.", "memory"),
    EventClass(19, "node_args", (
        _f("node_id", "u32", "execution id of the dfc:node_begin it describes"),
        _f("shapes", "sid", "input shapes, e.g. [[8, 3, 32, 32], [64, 3, 7, 7], []]"),
        _f("dtypes", "sid", "input dtypes, e.g. float32,float32,"),
    ), "Input shapes and dtypes of a node execution (recorded by sources that know them).", "dataflow"),
    EventClass(20, "launch", (
        _TID,
        _CORR,
    ), "A runtime API call (the dfc:api_enter at the same time) put GPU work with this correlation id "
       "on a queue: written only for calls whose GPU activity is in the trace.", "gpu_api"),
    EventClass(21, "node_link", (
        _f("source", "u32", "node_id of the earlier node execution"),
        _f("target", "u32", "node_id of the later one"),
        _f("kind", "sid", "what joins them: fwdbwd (a forward op and its backward op)"),
    ), "A link between two node executions that is not a tensor edge, at the target's start.", "dataflow"),
    EventClass(22, "kernel_info", (
        _DEVICE,
        _QUEUE,
        _CORR,
        _f("registers", "u32", "registers per thread, 0 when unknown"),
        _f("shared_memory", "u32", "shared memory per block in bytes (static + dynamic), 0 when unknown"),
        _f("blocks_per_sm_milli", "u32", "blocks per SM x 1000 (fixed point: floats decode badly), 0 when unknown"),
        _f("warps_per_sm_milli", "u32", "warps per SM x 1000, 0 when unknown"),
        _f("occupancy_pct", "u32", "estimated achieved occupancy in percent, 4294967295 when unknown"),
    ), "Launch configuration of a kernel (the dfc:kernel_begin with the same correlation id), where "
       "the source has it.", "gpu_activity"),
    EventClass(23, "sync_begin", (
        _DEVICE,
        _f("queue", "u32", "the queue that waits, 4294967295 for the whole device (a context sync)"),
        _CORR,
        _f("kind", "sid", "Stream Sync, Event Sync, Context Sync, Stream Wait Event"),
        _f("wait_queue", "u32", "the queue waited on (Stream Wait Event), 4294967295 when none"),
        _f("event_correlation", "u64", "correlation id of the event record waited on, 0 when unknown"),
    ), "A GPU synchronisation starts (CUPTI's cuda_sync): a queue or the device waits.", "gpu_activity"),
    EventClass(24, "sync_end", (
        _DEVICE,
        _f("queue", "u32", "the queue of the matching dfc:sync_begin"),
        _CORR,
    ), "A GPU synchronisation ends.", "gpu_activity"),
    EventClass(25, "annotation_begin", (
        _DEVICE,
        _f("track", "u32", "where it is: the thread (tid) on a CPU device, the queue on a GPU"),
        _f("annotation_id", "u32", "execution id, unique in the trace"),
        _f("name", "sid", "the user's label, e.g. forward, data_loading"),
    ), "A user annotation (torch.profiler.record_function, NVTX range) starts.", "annotations"),
    EventClass(26, "annotation_end", (
        _DEVICE,
        _f("track", "u32", "the track of the matching dfc:annotation_begin"),
        _f("annotation_id", "u32", "execution id of the matching dfc:annotation_begin"),
    ), "A user annotation ends.", "annotations"),
    EventClass(27, "process_rank", (
        _f("rank", "u32", "global rank in the job"),
        _f("local_rank", "u32", "rank on this host, 4294967295 when unknown"),
        _f("world_size", "u32", "number of ranks in the job"),
        _f("backend", "sid", "collective backend, e.g. gloo, nccl; empty when unknown"),
    ), "The process's place in a distributed job, once it is known.", "descriptions"),
    EventClass(28, "collective", (
        _f("node_id", "u32", "execution id of the dfc:node_begin that issued it"),
        _f("rank", "u32", "rank of the issuing process in the job, 4294967295 when unknown"),
        _f("kind", "sid", "all_reduce, broadcast, all_gather, reduce_scatter, send, recv, barrier, ..."),
        _f("group", "sid", "process group name, empty for the default group"),
        _f("group_size", "u32", "ranks in the group, 0 when unknown"),
        _f("seq", "u64", "issue order of this rank's collectives: the same collective has the same seq on every rank"),
        _f("bytes", "u64", "payload bytes on this rank, 0 when unknown"),
    ), "A collective or point-to-point communication op, at the start of its node.", "dataflow"),
)

BY_NAME: Final[dict[str, EventClass]] = {c.name: c for c in CATALOGUE}
BY_SHORT: Final[dict[str, EventClass]] = {c.short: c for c in CATALOGUE}
BY_ID: Final[dict[int, EventClass]] = {c.id: c for c in CATALOGUE}

STRING_DEF: Final = BY_SHORT["string_def"]

# Trace environment entries (TSDL ``env``) that place a process in its job, written by
# tracer.job: ``ppid`` finds the process ``record`` started (its parent is not in the job) and
# each one's children; ``process_role`` says what a child is for, where the recorder can tell.
ENV_PPID: Final = "ppid"
ENV_PROCESS_ROLE: Final = "process_role"
# The machine while the process recorded (tracer/session.py): cores it may use, the 1-minute load
# average at start and stop (strings, two decimals), the process's CPU seconds and wall seconds.
ENV_CORES: Final = "cores"
ENV_LOAD_START: Final = "load_start"
ENV_LOAD_END: Final = "load_end"
ENV_CPU_S: Final = "process_cpu_s"
ENV_WALL_S: Final = "wall_s"
DATA_LOADER_WORKER: Final = "dataloader_worker"
# What recording cost the program's threads (tracer/recorder_cost.py), written at stop: ns in the
# recorder's start, its hooks and its window cuts, how many cuts, the steps they were spread over; and the
# events the session discarded in all (tracer/session.py).
ENV_RECORDER_START_NS: Final = "recorder_start_ns"
ENV_RECORDER_HOOKS_NS: Final = "recorder_hooks_ns"
ENV_RECORDER_WINDOWS_NS: Final = "recorder_windows_ns"
ENV_RECORDER_WINDOWS: Final = "recorder_windows"
ENV_RECORDER_STEPS: Final = "recorder_steps"
ENV_RECORDER_HANDED_OFF: Final = "recorder_handed_off"  # windows converted in fork children
ENV_RECORDER_HANDOFF_WAIT_NS: Final = "recorder_handoff_wait_ns"  # ns the program waited for them
ENV_RECORDER_OPS: Final = "recorder_ops"  # ops the op observer recorded
ENV_RECORDER_OP_NS: Final = "recorder_op_ns"  # what it adds to one op, calibrated at the start
ENV_RECORDER_BESIDE_NS: Final = "recorder_beside_ns"  # CPU time of the recorder's window thread
ENV_DISCARDED: Final = "events_discarded"

# The job's calibration (tracer/calibrate.py), JSON beside the process traces: the hand-over
# between two threads (p50 and p90, and p90 beside one busy core), the slowdown of two lanes
# computing at once over one alone (quiet, and both beside one busy core), and the calibration's
# own node time (the slowdown is larger for smaller nodes).
CALIBRATION_FILE: Final = "calibration.json"
CAL_CORES: Final = "cores"
CAL_LANES: Final = "lanes"
CAL_HANDOVER_P50_NS: Final = "handover_p50_ns"
CAL_HANDOVER_P90_NS: Final = "handover_p90_ns"
CAL_BUSY_HANDOVER_P90_NS: Final = "busy_handover_p90_ns"
CAL_CONTENTION: Final = "contention"
CAL_BUSY_CONTENTION: Final = "busy_contention"
CAL_NODE_NS: Final = "node_ns"


def _check_catalogue() -> None:
    ids = [c.id for c in CATALOGUE]
    if ids != list(range(len(CATALOGUE))):
        raise AssertionError("event class ids must be 0..n-1 in order")
    if [c for c in CATALOGUE if c.is_variable] != [STRING_DEF]:
        raise AssertionError("only dfc:string_def may have variable-size records")


_check_catalogue()
