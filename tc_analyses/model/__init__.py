"""Models built from traces: Trace Compass-style state systems and the computation graph."""
