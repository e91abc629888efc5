"""Two runs' op sequences matched one to one by name and order (our trace's node runs against a
PyTorch execution trace's ops), tolerant of ops only one side recorded."""

from __future__ import annotations

ALIGN_WINDOW = 64  # ops skipped on either side to find the next common op


def align(ours: list[str], theirs: list[str], window: int = ALIGN_WINDOW) -> dict[int, int]:
    """Ops matched one to one by name and order: equal names advance both; else the smallest
    skip (up to `window` ops) on one side that makes the names equal. Linear in the op count."""
    matched: dict[int, int] = {}
    i = j = 0
    while i < len(ours) and j < len(theirs):
        if ours[i] == theirs[j]:
            matched[i] = j
            i, j = i + 1, j + 1
            continue
        for skip in range(1, window + 1):
            if j + skip < len(theirs) and ours[i] == theirs[j + skip]:
                j += skip
                break
            if i + skip < len(ours) and ours[i + skip] == theirs[j]:
                i += skip
                break
        else:
            i, j = i + 1, j + 1
    return matched
