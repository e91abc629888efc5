"""View-models of the generated Trace Compass analyses, built from the event catalogue.

Templates only loop and print: every id, label, event name, field name and attribute path they
use comes from here. Event and field names come from ``tracer.schema``, so a renamed field breaks
the build (jinja2's StrictUndefined), not Trace Compass at load time; analysis ids and attribute
paths come from ``tc_analyses.engine.layout``, which the headless summary reads them back with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tc_analyses.engine import layout
from tc_analyses.model.activity import Device
from tracer import schema

GENERATOR_VERSION = 1
GENERIC_CTF = "org.eclipse.linuxtools.tmf.ui.type.ctf"
EXPERIMENT = "org.eclipse.linuxtools.tmf.core.experiment.generic"
LTTNG_SCHED_SWITCH = "sched_switch"  # LTTng kernel: prev_tid, next_tid, CPU from the stream

# Runtime calls that put work on a GPU queue: they count in the queue depth until it starts.
LAUNCH_APIS = (
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemsetAsync", "cudaMemcpy", "cudaMemset",
    "hipLaunchKernel", "hipExtLaunchKernel", "hipMemcpyAsync", "hipMemsetAsync",
)


def events() -> dict[str, dict[str, Any]]:
    """short name -> {"name": "dfc:...", "f": {field: field}}: the catalogue as templates see it."""
    return {c.short: {"name": c.name, "f": {f.name: f.name for f in c.fields}} for c in schema.CATALOGUE}


def paths() -> dict[str, str | int]:
    """The attribute path segments and state values the templates write (``paths.DEVICES``...), from
    :mod:`tc_analyses.engine.layout`, which the summary reads them back with; and how many sub-lanes
    a GPU queue has for overlapping work (``paths.EXTRA_LANES``)."""
    return {**layout.names(), "EXTRA_LANES": layout.EXTRA_LANES}


@dataclass(frozen=True)
class DeviceVM:
    """One device row or series: `path` is the view-path segment (an index, or `*` for all)."""

    path: str
    title: str = ""  # appended to view labels, e.g. ": cuda:0"
    suffix: str = ""  # appended to view ids, e.g. ".dev1"


ALL_DEVICES = (DeviceVM("*"),)


@dataclass(frozen=True)
class Meta:
    generator: int
    schema: str
    version: int
    trace_types: tuple[str, ...]
    source: str = ""  # the trace the analyses were tailored to
    source_comment: str = ""  # the same, safe inside an XML comment (no "--")
    processes: tuple[str, ...] = ()  # a job's process traces, for the README's experiment section


@dataclass(frozen=True)
class Activity:
    begin: str
    end: str
    device: str
    queue: str
    correlation: str
    label: str = ""  # a constant label, or
    label_field: str = ""  # a sid field whose text labels the state


@dataclass(frozen=True)
class Analysis:
    """One output file: a state provider with its views (or, for latency, several patterns)."""

    name: str  # file stem
    template: str
    id: str
    label: str
    view_label: str
    classes: frozenset[str]  # event classes (short names) that make it worth emitting
    devices: tuple[DeviceVM, ...] = ALL_DEVICES
    activities: tuple[Activity, ...] = ()
    launch_events: tuple[dict[str, Any], ...] = ()  # events of calls that put GPU work on a queue
    events: tuple[dict[str, Any], ...] = ()
    patterns: tuple["Pattern", ...] = ()
    trace_types: tuple[str, ...] = ()  # overrides Meta.trace_types (experiment analyses)
    sched_switch: str = ""  # the LTTng kernel event an experiment analysis reads


@dataclass(frozen=True)
class StartFilter:
    field: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Pattern:
    id: str
    fsm: str
    label: str
    prefix: str
    doc: str
    start: str
    ends: tuple[str, ...]
    key: str
    label_field: str
    start_filter: StartFilter | None = None
    classes: frozenset[str] = field(default_factory=frozenset)  # all needed in the trace
    any_of: frozenset[str] = field(default_factory=frozenset)  # and at least one of these, if given


@dataclass(frozen=True)
class TraceFacts:
    """What a trace holds, for tailoring: event classes present and devices."""

    name: str
    classes: frozenset[str]
    devices: tuple[Device, ...]  # by index
    memory_devices: frozenset[int] = frozenset()  # devices with allocations or frees
    processes: tuple[str, ...] = ()  # a job folder's process traces (folder: role), opened as one experiment


# Characters XML 1.0 cannot hold (lone surrogates come from undecodable file names).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """Trace-given text (trace and device names) made printable in XML: one line, no illegal characters."""
    return _NOT_XML.sub("\ufffd", re.sub(r"[\t\n\r]", " ", text))


def comment_text(text: str) -> str:
    """xml_text that may also sit inside <!-- -->: no "--", no trailing "-"."""
    text = xml_text(text)
    while "--" in text:
        text = text.replace("--", "-\u2010")  # a hyphen that is not '-'
    return text + " " if text.endswith("-") else text


def _device_vms(facts: TraceFacts | None, gpu_only: bool = False, only: frozenset[int] | None = None
                ) -> tuple[DeviceVM, ...]:
    """One entry per described device (all, GPUs only, or those in `only`); `*` when none is described."""
    if facts is None:
        return ALL_DEVICES
    # GPUs as the GPU analysis tells them, by the recorded kind (its stateProvider tests kind != "cpu")
    chosen = [(d.index, d.name) for d in facts.devices
              if (not gpu_only or d.kind != "cpu") and (only is None or d.index in only)]
    if not chosen:  # a trace without dfc:device_info (or none of that kind): match every device
        return ALL_DEVICES
    return tuple(DeviceVM(str(i), f": {xml_text(name)}", f".dev{i}") for i, name in sorted(chosen))


def build(facts: TraceFacts | None = None) -> tuple[Meta, list[Analysis]]:
    """The analyses to generate: all of them, or those a trace's events and devices call for."""
    c = {cls.short: cls for cls in schema.CATALOGUE}
    major, minor = schema.SCHEMA_VERSION
    source = xml_text(facts.name) if facts else ""
    meta = Meta(GENERATOR_VERSION, f"{major}.{minor}", GENERATOR_VERSION * 1000 + major * 100 + minor,
                (GENERIC_CTF,), source, comment_text(source),
                tuple(xml_text(p) for p in facts.processes) if facts else ())
    suffix = f" ({source})" if facts else ""
    activities = (
        Activity(c["kernel_begin"].name, c["kernel_end"].name, "device", "queue", "correlation_id", label_field="name"),
        Activity(c["memcpy_begin"].name, c["memcpy_end"].name, "device", "queue", "correlation_id", label="memcpy"),
        Activity(c["memset_begin"].name, c["memset_end"].name, "device", "queue", "correlation_id", label="memset"),
    )
    gpu_classes = frozenset({"kernel_begin", "memcpy_begin", "memset_begin"})
    patterns = (
        Pattern(layout.NODE_LATENCY_ID, "node", "dfcompass: node duration" + suffix, "Node duration",
                "Node duration: dfc:node_begin to the dfc:node_end of the same node_id, named by op.",
                c["node_begin"].name, (c["node_end"].name,), "node_id", "op", classes=frozenset({"node_begin"})),
        Pattern(layout.KERNEL_LATENCY_ID, "kernel", "dfcompass: kernel duration" + suffix, "Kernel duration",
                "Kernel duration: dfc:kernel_begin to dfc:kernel_end of the same correlation id, named by kernel.",
                c["kernel_begin"].name, (c["kernel_end"].name,), "correlation_id", "name",
                classes=frozenset({"kernel_begin"})),
        Pattern(layout.LAUNCH_LATENCY_ID, "launch", "dfcompass: launch to start" + suffix, "Launch to start",
                "Launch-to-start delay: a launch API call (dfc:api_enter) to the start of the GPU activity "
                "with the same correlation id, named by the API.",
                c["api_enter"].name, (c["kernel_begin"].name, c["memcpy_begin"].name, c["memset_begin"].name),
                "correlation_id", "name", StartFilter("name", LAUNCH_APIS),
                classes=frozenset({"api_enter"}), any_of=gpu_classes),
        Pattern(layout.TRANSFER_LATENCY_ID, "transfer", "dfcompass: transfer duration" + suffix,
                "Transfer duration",
                "Transfer duration: dfc:memcpy_begin to dfc:memcpy_end of the same correlation id, named by kind.",
                c["memcpy_begin"].name, (c["memcpy_end"].name,), "correlation_id", "copy_kind",
                classes=frozenset({"memcpy_begin"})),
    )
    analyses = [
        Analysis("dataflow", "dataflow.xml.j2", layout.DATAFLOW_ID, "dfcompass: dataflow nodes" + suffix,
                 "Dataflow nodes by device and thread" + suffix, frozenset({"node_begin"}),
                 devices=_device_vms(facts, gpu_only=False)),
        Analysis("gpu", "gpu.xml.j2", layout.GPU_ID, "dfcompass: GPU queues" + suffix,
                 "GPU queues" + suffix, gpu_classes, devices=_device_vms(facts, gpu_only=True),
                 activities=activities, launch_events=(events()["launch"],)),
        Analysis("api", "api.xml.j2", layout.API_ID, "dfcompass: runtime API calls" + suffix,
                 "Runtime API calls by thread" + suffix, frozenset({"api_enter"})),
        Analysis("memory", "memory.xml.j2", layout.MEMORY_ID, "dfcompass: memory" + suffix,
                 "Memory in use" + suffix, frozenset({"mem_alloc", "mem_free"}),
                 devices=_device_vms(facts, only=facts.memory_devices if facts else None),
                 events=tuple(events()[name] for name in ("mem_alloc", "mem_free"))),
        Analysis("experiment", "experiment.xml.j2", layout.EXPERIMENT_ID,
                 "dfcompass: dataflow threads on CPUs (with an LTTng kernel trace)" + suffix,
                 "Dataflow threads on and off CPU" + suffix, frozenset({"node_begin"}),
                 trace_types=(EXPERIMENT,), sched_switch=LTTNG_SCHED_SWITCH),
        Analysis("ranks", "ranks.xml.j2", layout.RANKS_ID, "dfcompass: ranks of a job" + suffix,
                 "Ranks at collectives" + suffix, frozenset({"collective"}), trace_types=(GENERIC_CTF, EXPERIMENT)),
        Analysis("latency", "latency.xml.j2", layout.LATENCY_ID, "dfcompass: latency patterns" + suffix,
                 "", frozenset(), patterns=patterns),
    ]
    if facts is None:
        return meta, analyses
    kept = []
    for analysis in analyses:
        if analysis.patterns:
            wanted = tuple(p for p in analysis.patterns
                           if p.classes <= facts.classes and (not p.any_of or p.any_of & facts.classes))
            if wanted:
                kept.append(_with_patterns(analysis, wanted))
        elif analysis.classes & facts.classes:
            kept.append(analysis)
    return meta, kept


def _with_patterns(analysis: Analysis, patterns: tuple[Pattern, ...]) -> Analysis:
    from dataclasses import replace

    return replace(analysis, patterns=patterns)
