"""Trace Compass data-driven analyses generated from the event catalogue (and a trace)."""

from tc_analyses.export.tracecompass.render import render_xml, write_output

__all__ = ["render_xml", "write_output"]
