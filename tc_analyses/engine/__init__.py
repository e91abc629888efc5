"""The headless Trace Compass interpreter: XML state providers and patterns run over a trace.

``state_system`` holds Trace Compass's attribute tree and intervals, ``xml_provider`` and
``xml_pattern`` compile the XML analyses, ``events`` feeds them a trace's events in time order,
``run`` builds every analysis of a set of XML files, and ``layout`` names the analysis ids and
attribute paths that dfcompass's generated analyses write and its summary reads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tc_analyses.engine.run import BuiltAnalyses, build
    from tc_analyses.engine.state_system import Interval, StateSystem, Value
    from tc_analyses.engine.xml_pattern import Segment, load_patterns
    from tc_analyses.engine.xml_provider import XmlAnalysisError, load_providers

# Loaded on first use: the views writers and reports read `layout` alone, and the interpreter's
# modules cost 0.1 s to import (a tenth of recommend-placement on a 10k-node graph file).
_HOMES = {"BuiltAnalyses": "run", "build": "run", "Interval": "state_system", "StateSystem": "state_system",
          "Value": "state_system", "Segment": "xml_pattern", "load_patterns": "xml_pattern",
          "XmlAnalysisError": "xml_provider", "load_providers": "xml_provider"}

__all__ = ["BuiltAnalyses", "Interval", "Segment", "StateSystem", "Value", "XmlAnalysisError", "build",
           "load_patterns", "load_providers"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
