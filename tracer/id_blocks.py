"""Trace-wide ids (nodes, tensors, annotations, strings) handed out in blocks shared across a fork.

A recorder that converts its windows in fork children (:mod:`tracer.fork_chain`) allocates ids in
those children while the program may still allocate them itself (the dataflow API, thread and
device names). Both must stay unique in the one trace, so once a session shares its ids each side
takes whole blocks from counters in shared memory and numbers within its block alone: one lock
per block, none per id. String ids must stay dense (the reader sizes its string table by the
largest id, tc_analyses/reader/fast.py), so string blocks are small and an unused tail is at most
one block per side.
"""

from __future__ import annotations

import mmap
import struct
from typing import Iterator

# The counters, in the order of their slots in the shared page.
NAMES = ("node", "tensor", "annotation", "string")
# Ids per block: strings are dense, so theirs are small; the others are join keys and may have holes.
BLOCK = {"node": 1 << 16, "tensor": 1 << 16, "annotation": 1 << 12, "string": 256}
_SLOT = struct.Struct("<Q")
_LOCK_TIMEOUT_S = 10.0


class SharedIdBlocks:
    """Next free id of each counter, in an anonymous shared mapping that fork children share."""

    def __init__(self, starts: dict[str, int]) -> None:
        import multiprocessing  # only here: a session that shares no ids does not pay its import

        self._page = mmap.mmap(-1, mmap.PAGESIZE)  # MAP_SHARED | MAP_ANONYMOUS: one page for all processes
        self._lock = multiprocessing.get_context("fork").Lock()
        for slot, name in enumerate(NAMES):
            _SLOT.pack_into(self._page, slot * 8, starts.get(name, 0))

    def take(self, name: str) -> int:
        """The first id of a new block of `name` ids, now this process's alone."""
        slot, size = NAMES.index(name) * 8, BLOCK[name]
        if not self._lock.acquire(timeout=_LOCK_TIMEOUT_S):
            raise RuntimeError(f"the shared {name} id counter stayed locked for {_LOCK_TIMEOUT_S:.0f} s")
        try:
            (start,) = _SLOT.unpack_from(self._page, slot)
            _SLOT.pack_into(self._page, slot, start + size)
        finally:
            self._lock.release()
        return int(start)

    def ids(self, name: str, first: int = 0, end: int = 0) -> Iterator[int]:
        """Ids of `name`: the rest of [first, end) if given, then whole new blocks (a generator: fast `next`)."""
        yield from range(first, end)
        size = BLOCK[name]
        while True:
            start = self.take(name)
            yield from range(start, start + size)


class BlockCursor:
    """A position in a block of ids that can be handed on (pickled) to the next process of a chain."""

    __slots__ = ("shared", "name", "next", "end")

    def __init__(self, shared: SharedIdBlocks, name: str, next_id: int = 0, end: int = 0) -> None:
        self.shared = shared
        self.name = name
        self.next = next_id
        self.end = end

    def __next__(self) -> int:
        if self.next >= self.end:
            self.next = self.shared.take(self.name)
            self.end = self.next + BLOCK[self.name]
        value = self.next
        self.next += 1
        return value

    def __iter__(self) -> "BlockCursor":
        return self

    def position(self) -> tuple[int, int]:
        return self.next, self.end
