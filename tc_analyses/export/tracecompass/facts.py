"""What a dfcompass trace holds, for tailoring the generated analyses to it."""

from __future__ import annotations

from pathlib import Path

from tc_analyses.export.tracecompass.model import TraceFacts
from tc_analyses.reader import DfcTrace, read_trace


def trace_facts(source: str | Path | DfcTrace) -> TraceFacts:
    """Event classes present and devices described in a trace (read already, or at a path)."""
    trace = source if isinstance(source, DfcTrace) else read_trace(source)
    classes = frozenset(table.cls.short for table in trace.tables.values() if len(table))
    devices = trace.table("device_info")
    rows = zip(devices["device"].tolist(), devices.text("name").tolist(), devices.text("kind").tolist())
    unique = {index: (index, name or f"device {index}", kind or "") for index, name, kind in rows}
    memory = frozenset(int(d) for name in ("mem_alloc", "mem_free") for d in set(trace.table(name)["device"].tolist()))
    return TraceFacts(Path(trace.path).resolve().name, classes, tuple(unique[i] for i in sorted(unique)), memory)
