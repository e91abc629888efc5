"""dfcompass recorder: trace dataflow programs into CTF 1.8.

Imports only the standard library, so any Python program can be traced.

>>> import tracer, tempfile, os
>>> out = os.path.join(tempfile.mkdtemp(), "trace")
>>> with tracer.Session(out):
...     with tracer.step(0):
...         with tracer.node("load", op="read") as n:
...             n.output(data := bytearray(16))
...         with tracer.node("sum", inputs=[data]):
...             total = sum(data)
>>> sorted(os.listdir(out))[:3]
['device_info-...', ...]  # doctest: +SKIP
"""

from __future__ import annotations

import os

from tracer.clock import FixedClock, MonotonicClock
from tracer.dataflow import node, step, traced
from tracer.schema import CATALOGUE, SCHEMA_VERSION
from tracer.session import Session, active_session

__all__ = [
    "CATALOGUE", "FixedClock", "MonotonicClock", "SCHEMA_VERSION", "Session",
    "active_session", "node", "start", "step", "stop", "traced",
]


def start(path: str | os.PathLike[str], **options: object) -> Session:
    """Start recording to `path` (see :class:`Session` for the options)."""
    return Session(path, **options).start()  # type: ignore[arg-type]


def stop() -> None:
    """Stop the active session, if any, and finalize its trace."""
    session = active_session()
    if session is not None:
        session.stop()
