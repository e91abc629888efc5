"""Sync-bearing ops: on a GPU, an op that hands a tensor's value to the host is a device-to-host
copy plus a wait for the queue, and the host thread waits with it (issue 33: ``aten::item`` in
``Adam.step`` was moved to a GPU at 5 us).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from tc_analyses.model import graph_keys as K
from tc_analyses.perf.devices import spec_of
from tc_analyses.perf.problem import Cost, CostSource, Device, Link

if TYPE_CHECKING:  # only for annotations: networkx loads when a graph is built
    import networkx as nx


def _op_key(op: str) -> str:
    base = op.rsplit("::", 1)[-1].split(".", 1)[0]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


# Ops that hand a GPU tensor's value to the host: on a GPU each is a device-to-host copy plus a wait
# for the queue to drain up to it (the host thread is held meanwhile). `.cpu()`, `tolist()` and
# printing a tensor come through `_local_scalar_dense` or `to`; boolean-mask indexing through
# `nonzero` (see is_sync for the mask).
SYNC_OPS = frozenset({"item", "_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique",
                      "_unique2", "unique_consecutive", "tolist", "cpu"})
SYNC_WAIT_NS = 10_000  # a stream synchronisation's own cost (cudaStreamSynchronize / a blocking copy), ~10 us


def is_sync(op: str, dtypes: str = "") -> bool:
    """Whether `op` makes the host wait for a GPU: a value read back, or an index by a boolean mask."""
    key = _op_key(op)
    return key in SYNC_OPS or (key == "index" and "bool" in dtypes.lower())


def price_syncs(graph: nx.DiGraph, devices: list[Device], costs: dict[tuple[int, str], Cost],
                links: dict[tuple[str, str], Link], memory: Callable[[int], int]) -> frozenset[tuple[int, str]]:
    """Sync-bearing ops (:func:`is_sync`) on a GPU cost their modelled time plus the device-to-host
    copy of what they output and a synchronisation, and hold the host thread for all of it: the
    (task, device) pairs returned. Where they ran on a GPU their measured time has all that already."""
    hosts = {d.host: d.name for d in devices if spec_of(d).kind == "cpu"}
    blocking = set()
    for node, attrs in graph.nodes(data=True):
        if not is_sync(attrs.get(K.OP, ""), attrs.get(K.INPUT_DTYPES, "")):
            continue
        for device in devices:
            if spec_of(device).kind != "gpu":
                continue
            blocking.add((node, device.name))
            cost = costs[(node, device.name)]
            if cost.source in (CostSource.MEASURED, CostSource.IDENTICAL):
                continue
            host = hosts.get(device.host)
            link = links.get((device.name, host)) if host is not None else None
            copy = link.time_ns(max(memory(node), 8)) if link is not None else 0
            costs[(node, device.name)] = Cost(cost.ns + copy + SYNC_WAIT_NS, cost.source)
    return frozenset(blocking)
