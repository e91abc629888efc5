"""Analyses: pure functions from a trace or model to a frozen result dataclass."""
