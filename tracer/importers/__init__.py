"""Importers: turn traces written by other tools into dfcompass traces.

The package loads nothing heavy: the recorder uses its field helpers (:mod:`kineto_fields`,
:mod:`kineto_source`, standard library only), and :func:`import_kineto` (numpy and msgspec for
the fast path) loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracer.importers.kineto_source import KinetoImportError
from tracer.importers.kineto_summary import ImportSummary

if TYPE_CHECKING:
    from tracer.importers.kineto import import_kineto

__all__ = ["ImportSummary", "KinetoImportError", "import_kineto"]


def __getattr__(name: str) -> Any:
    if name == "import_kineto":
        from tracer.importers.kineto import import_kineto

        return import_kineto
    raise AttributeError(f"module 'tracer.importers' has no attribute {name!r}")
