"""Exporters: text and JSON reports (and, later, Trace Compass XML and graph files)."""
