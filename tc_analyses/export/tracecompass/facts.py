"""What a dfcompass trace holds, for tailoring the generated analyses to it."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.export.tracecompass.model import TraceFacts
from tc_analyses.model.activity import read_devices
from tc_analyses.reader import DfcTrace, read_trace


def trace_facts(source: str | Path | DfcTrace) -> TraceFacts:
    """Event classes present and devices described in a trace (read already, or at a path)."""
    trace = source if isinstance(source, DfcTrace) else read_trace(source)
    classes = frozenset(table.cls.short for table in trace.tables.values() if len(table))
    devices = read_devices(trace)
    memory = frozenset(int(d) for name in ("mem_alloc", "mem_free") for d in set(trace.table(name)["device"].tolist()))
    return TraceFacts(Path(trace.path).resolve().name, classes, tuple(devices[i] for i in sorted(devices)), memory)
