"""The headless Trace Compass interpreter: XML state providers and patterns run over a trace.

``state_system`` holds Trace Compass's attribute tree and intervals, ``xml_provider`` and
``xml_pattern`` compile the XML analyses, ``events`` feeds them a trace's events in time order,
``run`` builds every analysis of a set of XML files, and ``layout`` names the analysis ids and
attribute paths that dfcompass's generated analyses write and its summary reads.
"""

from __future__ import annotations

from tc_analyses.engine.run import BuiltAnalyses, build
from tc_analyses.engine.state_system import Interval, StateSystem, Value
from tc_analyses.engine.xml_pattern import Segment, load_patterns
from tc_analyses.engine.xml_provider import XmlAnalysisError, load_providers

__all__ = ["BuiltAnalyses", "Interval", "Segment", "StateSystem", "Value", "XmlAnalysisError", "build",
           "load_patterns", "load_providers"]
