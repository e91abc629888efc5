"""Seeded mutations of a small CTF trace: byte changes, truncations, huge 32/64-bit values, damaged
metadata, duplicated and deleted streams.

Used by tests/test_reader/test_trace_fuzz.py and scripts/fuzz.py; each case is fully determined by
its seed. Works on any CTF trace directory (ours or LTTng's).
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

HUGE = (b"\xff" * 8, b"\x00\x00\x00\x80\x00\x00\x00\x00", b"\xff\xff\xff\x7f\x00\x00\x00\x00")
HUGE_TEXT = (b"18446744073709551615", b"4294967296", b"999999999999999999999999", b"-1", b"0")


def _damage_stream(rng: random.Random, data: bytearray) -> bytearray:
    if not data:  # cut to nothing by an earlier damage
        return data
    kind = rng.random()
    if kind < 0.55:
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind < 0.8:
        data = data[: rng.randrange(len(data))]
    else:  # a huge value where a size, id or timestamp may be
        at = rng.randrange(0, max(1, len(data) - 8)) & ~3
        data[at:at + 8] = rng.choice(HUGE)
    return data


def _damage_metadata(rng: random.Random, data: bytearray) -> bytearray:
    if not data:
        return data
    kind = rng.random()
    if kind < 0.4:  # a number (a size, an alignment, an offset, an id) made huge or zero
        numbers = list(re.finditer(rb"\d+", data))
        if numbers:
            found = rng.choice(numbers)
            data[found.start():found.end()] = rng.choice(HUGE_TEXT)
    elif kind < 0.7:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(32, 127)
    else:
        data = data[: rng.randrange(len(data))]
    return data


def mutate_trace(source: Path, out: Path, seed: int) -> Path:
    """A copy of trace `source` at `out` with one to three of its files damaged, copied or deleted."""
    rng = random.Random(seed)
    shutil.copytree(source, out, copy_function=shutil.copyfile)  # not the modes: shared traces are read-only
    for folder in (out, *(p for p in out.rglob("*") if p.is_dir())):
        folder.chmod(0o755)
    streams = sorted(p for p in out.iterdir() if p.is_file() and p.name != "metadata" and p.stat().st_size)
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if not streams:
            break
        if kind < 0.75:
            path = rng.choice(streams)
            path.write_bytes(bytes(_damage_stream(rng, bytearray(path.read_bytes()))))
        elif kind < 0.85:
            metadata = out / "metadata"
            metadata.write_bytes(bytes(_damage_metadata(rng, bytearray(metadata.read_bytes()))))
        elif kind < 0.93:  # a stream twice: same packets under another name
            path = rng.choice(streams)
            shutil.copy(path, out / f"{path.name}-copy")
        else:
            path = rng.choice(streams)
            path.unlink()
            streams.remove(path)
    return out
