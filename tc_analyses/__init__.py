"""dfcompass analysis side: read CTF traces, model them, analyse and export.

Data flows one way: reader -> model -> engine -> perf -> analyses -> export -> inputs -> app -> cli.
"""

from __future__ import annotations

from typing import Any

from tc_analyses.errors import DfcompassError, TraceError

__all__ = ["DfcompassError", "TraceError", "read_trace"]


def __getattr__(name: str) -> Any:
    # The reader needs numpy: load it on first use, so `dfcompass --help` starts fast.
    if name == "read_trace":
        from tc_analyses.reader import read_trace

        return read_trace
    raise AttributeError(f"module 'tc_analyses' has no attribute {name!r}")
