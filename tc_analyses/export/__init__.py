"""Exporters: text and JSON reports, Trace Compass XML and graph files (GraphML, DOT)."""
