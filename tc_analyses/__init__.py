"""dfcompass analysis side: read CTF traces, model them, analyse and export.

Data flows one way: reader -> model -> analyses -> export -> cli.
"""

from tc_analyses.errors import DfcompassError, TraceError
from tc_analyses.reader import read_trace

__all__ = ["DfcompassError", "TraceError", "read_trace"]
