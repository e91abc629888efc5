"""Embedded workloads that `dfcompass demo` records."""
