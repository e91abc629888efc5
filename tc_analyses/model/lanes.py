"""Lanes for work that overlaps on one GPU queue (programmatic dependent launch, PDL).

A queue normally runs one operation at a time; with PDL a kernel may start before the previous one
on the same stream ends. Views that draw one row per queue would merge or drop one of them, so each
operation gets a *lane*: the first lane (0 is the queue's own row) free when it starts, the way the
generated Trace Compass analysis assigns ``GPU/<device>/Queues/<queue>/lane <n>``
(``xml_templates/gpu.xml.j2``). A lane whose operation ends at the time the next one starts is free.

>>> from tc_analyses.model.activity import GpuOp
>>> a, b, c = (GpuOp("kernel", "cuda:0", 7, i, s, e, "k") for i, (s, e) in enumerate([(0, 10), (5, 20), (10, 15)]))
>>> lanes([a, b, c])
[0, 1, 0]
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from tc_analyses.model.activity import GpuOp


def lanes(ops: Sequence[GpuOp]) -> list[int]:
    """The lane of each operation (in the order given) on its (device, queue): the first lane
    free at its start."""
    per_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)  # (start, end, position)
    for i, op in enumerate(ops):
        per_queue[(op.device, op.queue)].append((op.start, op.end, i))
    found = [0] * len(ops)
    for queue_ops in per_queue.values():
        busy_until: list[int] = []  # per lane, the end of its operation
        for start, end, i in sorted(queue_ops):
            lane = next((n for n, until in enumerate(busy_until) if until <= start), len(busy_until))
            if lane == len(busy_until):
                busy_until.append(end)
            else:
                busy_until[lane] = end
            found[i] = lane
    return found
