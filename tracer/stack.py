"""Where this thread's Python stack is: which library's code is running below us.

The recorder asks it at fork time (a DataLoader starting its workers) and before it ends a window
(never inside a DataLoader's fetch); both look for the same file of torch's.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DATA_LOADER_FILE = os.path.join("torch", "utils", "data", "dataloader.py")


def in_file(suffix: str, frames: int | None = None, skip: int = 2) -> bool:
    """Whether a frame of this thread's stack runs code from a file ending with `suffix`, among
    the `frames` innermost (all with None), above the caller's `skip` frames."""
    frame: Any = sys._getframe(skip)
    seen = 0
    while frame is not None and (frames is None or seen < frames):
        if frame.f_code.co_filename.endswith(suffix):
            return True
        frame, seen = frame.f_back, seen + 1
    return False
