"""Whether the frameworks' own notices reach the console.

By default dfcompass keeps third-party start-up noise off the console of what it runs (TensorFlow's
C++ log, torch.profiler's per-window lines and advice, Dask's worker logs): it is no finding of
dfcompass and buries the program's own output. ``dfcompass --verbose`` sets :data:`VERBOSE_ENV` for
itself and every process it starts (the recorded program, its workers, the demo's workloads, Dask's
workers), and then nothing is held back.
"""

from __future__ import annotations

import os

VERBOSE_ENV = "DFCOMPASS_VERBOSE"


def verbose() -> bool:
    """Whether the frameworks' notices are let through (:data:`VERBOSE_ENV` set, and not to 0)."""
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def quiet_tensorflow() -> None:
    """TensorFlow's C++ start-up notices off (before it loads), unless verbose; a user's own
    TF_CPP_MIN_LOG_LEVEL wins."""
    if not verbose():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
