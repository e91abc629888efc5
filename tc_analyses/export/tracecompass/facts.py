"""What a dfcompass trace holds, for tailoring the generated analyses to it."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.export.tracecompass.model import TraceFacts
from tc_analyses.model.activity import Device
from tc_analyses.model.activity import read_devices
from tc_analyses.reader import DfcTrace, read_trace


def trace_facts(source: str | Path | DfcTrace) -> TraceFacts:
    """Event classes present and devices described in a trace (read already, or at a path)."""
    trace = source if isinstance(source, DfcTrace) else read_trace(source)
    classes = frozenset(table.cls.short for table in trace.tables.values() if len(table))
    devices = read_devices(trace)
    memory = frozenset(int(d) for name in ("mem_alloc", "mem_free") for d in set(trace.table(name)["device"].tolist()))
    return TraceFacts(Path(trace.path).resolve().name, classes, tuple(devices[i] for i in sorted(devices)), memory)


def job_facts(job: str | Path) -> TraceFacts:
    """What a job folder's process traces hold together: the analyses generated from it run on
    each process's trace when Trace Compass opens the folder's traces as one experiment.

    Device indices are numbered per process: the devices are listed when every process that
    describes an index gives it the same device, else left open (the analyses take any device)."""
    from tc_analyses.reader.job import describe, job_traces, roles

    processes = job_traces(job)
    role = roles(processes)
    each = [trace_facts(p.path) for p in processes]
    by_index: dict[int, Device] = {}
    agree = True
    for facts in each:
        for device in facts.devices:
            known = by_index.setdefault(device.index, device)
            agree = agree and (known.name, known.kind) == (device.name, device.kind)
    return TraceFacts(Path(job).resolve().name, frozenset().union(*(f.classes for f in each)),
                      tuple(by_index[i] for i in sorted(by_index)) if agree else (),
                      frozenset().union(*(f.memory_devices for f in each)),
                      tuple(f"{p.path.relative_to(job)}: {describe(p, role[p.path])}" for p in processes))
