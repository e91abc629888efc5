"""Run a traced program as a child that never outlives, or is orphaned by, `dfcompass record`.

* SIGTERM and SIGHUP sent to dfcompass are passed on to the program, whose tracing session then
  finishes its trace (the session handles SIGTERM); dfcompass waits for it and returns its status.
* SIGINT from a terminal reaches the whole process group, so the program gets it directly;
  dfcompass ignores it while the program runs instead of dying first.
* If dfcompass itself is killed (SIGKILL), the kernel sends the program SIGTERM (Linux
  ``PR_SET_PDEATHSIG``), so it stops and writes its trace rather than running on unattended.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGTERM, signal.SIGHUP)


def _die_with_parent() -> None:  # runs in the child, between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def run_child(command: list[str], env: Mapping[str, str], stdout: Any = None) -> int:
    """Run `command` to its end (see the module docstring); its exit status (-N: killed by signal N).
    FileNotFoundError when the command does not exist."""
    process = subprocess.Popen(command, env=dict(env), stdout=stdout, preexec_fn=_die_with_parent)
    if threading.current_thread() is not threading.main_thread():
        return process.wait()  # signal handlers can only be set from the main thread

    def forward(signum: int, frame: Any) -> None:
        process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
