"""The ``copy_kind`` of a copy from its CUPTI/Kineto activity name.

CUPTI (through Kineto) names copies ``Memcpy <kind> (<src memory> -> <dst memory>)``, e.g.
``Memcpy HtoD (Pageable -> Device)``. A dfcompass ``copy_kind`` is the direction, followed by the
kind of the host memory when one end is on the host and the name says which:
``"HtoD pageable"``, ``"DtoH pinned"``, ``"DtoD"``, ``"PtoP"``. Readers take the direction as the
first word (:func:`direction_of`). CUDA arrays count as device memory (``HtoA`` -> ``HtoD``); a
name that does not parse gives ``"Unknown"``.

Pageable host memory matters: the driver stages it through a pinned bounce buffer, so the copy
is slower and synchronous with the host.
"""

from __future__ import annotations

import re

UNKNOWN = "Unknown"
PAGEABLE = "pageable"
PINNED = "pinned"

_NAME = re.compile(r"^Memcpy\s+([A-Za-z]+)(?:\s*\(\s*([^()]*?)\s*->\s*([^()]*?)\s*\))?")
_HOST_MEMORY = {"pageable": PAGEABLE, "pinned": PINNED}


def copy_kind_of(name: str) -> str:
    """``'Memcpy DtoH (Device -> Pinned)'`` -> ``'DtoH pinned'``; ``'Memcpy DtoD ...'`` -> ``'DtoD'``."""
    match = _NAME.match(name.strip())
    if match is None:
        return UNKNOWN
    direction = match.group(1)
    if len(direction) == 4 and direction[1:3] == "to":
        direction = direction.replace("A", "D")  # a CUDA array is device memory
    src = _HOST_MEMORY.get((match.group(2) or "").lower(), "")
    dst = _HOST_MEMORY.get((match.group(3) or "").lower(), "")
    if direction == "HtoD":
        host = src
    elif direction == "DtoH":
        host = dst
    elif direction == "HtoH":
        # Either end pageable makes the copy staged and synchronous: report the slower one.
        host = PAGEABLE if PAGEABLE in (src, dst) else (PINNED if src and dst else "")
    else:
        host = ""
    return f"{direction} {host}" if host else direction


def direction_of(copy_kind: str) -> str:
    """The direction (first word) of a ``copy_kind`` value: ``'HtoD pageable'`` -> ``'HtoD'``."""
    return copy_kind.split(maxsplit=1)[0] if copy_kind.strip() else ""


def host_memory_of(copy_kind: str) -> str:
    """``'pageable'``, ``'pinned'`` or ``''`` (not recorded, or no host end) of a ``copy_kind`` value."""
    words = copy_kind.split()
    return words[1] if len(words) > 1 and words[1] in (PAGEABLE, PINNED) else ""


def copy_ends(copy_kind: str, device: str, host: str = "cpu") -> tuple[str, str]:
    """Source and destination of a copy on GPU `device`: H is the `host`, D the device itself."""
    direction = direction_of(copy_kind)
    ends = {"H": host, "D": device}
    return ends.get(direction[:1], device), ends.get(direction[-1:], device)
