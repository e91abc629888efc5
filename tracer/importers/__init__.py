"""Importers: turn traces written by other tools into dfcompass traces (standard library only)."""

from __future__ import annotations

from tracer.importers.kineto import import_kineto
from tracer.importers.kineto_source import KinetoImportError
from tracer.importers.kineto_summary import ImportSummary

__all__ = ["ImportSummary", "KinetoImportError", "import_kineto"]
