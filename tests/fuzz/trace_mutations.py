"""Seeded mutations of a small dfcompass trace: byte changes, truncations, huge 32/64-bit values.

Used by tests/test_reader/test_trace_fuzz.py; each case is fully determined by its seed.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

HUGE = (b"\xff" * 8, b"\x00\x00\x00\x80\x00\x00\x00\x00", b"\xff\xff\xff\x7f\x00\x00\x00\x00")


def mutate_trace(source: Path, out: Path, seed: int) -> Path:
    """A copy of trace `source` at `out` with one to three of its stream files damaged."""
    rng = random.Random(seed)
    shutil.copytree(source, out)
    files = sorted(p for p in out.iterdir() if p.name != "metadata" and p.stat().st_size)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(files)
        data = bytearray(path.read_bytes())
        kind = rng.random()
        if kind < 0.5:
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind < 0.7:
            data = data[: rng.randrange(len(data))]
        elif kind < 0.9:  # a huge value where a size, id or timestamp may be
            at = rng.randrange(0, max(1, len(data) - 8)) & ~3
            data[at:at + 8] = rng.choice(HUGE)
        path.write_bytes(bytes(data))
    return out
