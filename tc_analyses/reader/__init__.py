"""Trace readers: a fast numpy reader for dfcompass traces, our general CTF 1.8 reader for any
other CTF trace (:mod:`.ctf`), and babeltrace2 in a child process for what that one does not take.

``bt2`` is imported only by :mod:`tc_analyses.reader.bt2_source`, lazily.
"""

from tc_analyses.reader.fast import DfcTrace, EventTable, read_trace
from tc_analyses.reader.metadata import Metadata, read_metadata

__all__ = ["DfcTrace", "EventTable", "Metadata", "read_metadata", "read_trace"]
