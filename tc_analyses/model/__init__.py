"""Models built from traces: Trace Compass-style state systems (and, later, the computation graph)."""
