"""The transfer cost between the processes of a job, measured from its collectives.

For each collective joined across ranks (:mod:`tc_analyses.analyses.ranks`) and each rank, the
backend's span of that collective (``gloo:all_reduce``...; matched by
:func:`tc_analyses.analyses.job_graph.spans_by_collective`) runs from the rank's arrival until the
collective is done. The part after the last rank arrived is the transfer itself; before it the
rank only waits. A sample is ``(bytes on the wire, transfer ns)``, where the bytes a rank sends
follow the ring algorithms' convention of nccl-tests' "bus bandwidth": ``2(n-1)/n`` of the payload
for all-reduce, ``(n-1)/n`` for all-gather and reduce-scatter, the payload for the others.

The link ``latency + bytes / bandwidth`` is fitted by least squares on the collectives of even
``seq`` and checked on the odd ones, which the fit did not see: the relative error of its
predictions there is what the fit is worth (median and range). It is the cost of moving data
between the job's processes (between hosts when the ranks ran on several; on one host, through
loopback), which ``recommend-placement --links-from JOB`` uses for device pairs on different hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

from tc_analyses.analyses.job_graph import RankNodes, spans_by_collective
from tc_analyses.perf.cost import fit_link
from tc_analyses.perf.problem import Link

_WIRE = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
         "reduce_scatter": lambda n: (n - 1) / n}


@dataclass(frozen=True)
class LinkFit:
    """The fitted link and how well it predicts collectives it was not fitted on."""

    link: Link | None  # None: too few distinct sizes to fit
    fitted_on: int  # samples (rank, collective) of even seq
    held_out: int  # samples of odd seq
    error_median: float | None  # |predicted - measured| / measured on the held-out samples
    error_low: float | None
    error_high: float | None
    hosts: int  # distinct hosts among the ranks: 1 means the link is between processes of one host


def wire_bytes(kind: str, payload: int, ranks: int) -> int:
    factor = _WIRE.get(kind)
    return int(round(payload * factor(ranks))) if factor is not None and ranks > 1 else payload


def transfer_samples(ranks: list[RankNodes], joined: list[Any]) -> list[tuple[int, int, int]]:
    """(seq, bytes on the wire, transfer ns) per rank and joined collective with a backend span."""
    spans = spans_by_collective(ranks)
    where = {(r.rank, node): i for r in ranks for i, node in enumerate(r.node_ids)}
    by_rank = {r.rank: r for r in ranks}
    samples = []
    for c in joined:
        last = c.arrivals_ns[c.last_rank]
        for rank in c.arrivals_ns:
            span = spans.get((rank, c.seq))
            if span is None:
                continue
            r = by_rank[rank]
            i = where[(rank, span)]
            transfer = r.ends[i] - max(r.starts[i], last)
            if transfer > 0:
                samples.append((c.seq, wire_bytes(c.kind, c.bytes, len(c.arrivals_ns)), transfer))
    return samples


def fit_job_link(samples: list[tuple[int, int, int]], hosts: int) -> LinkFit:
    fit = [(b, t) for seq, b, t in samples if seq % 2 == 0]
    check = [(b, t) for seq, b, t in samples if seq % 2 == 1]
    link = fit_link([b for b, _ in fit], [t for _, t in fit]) if fit else None
    if link is not None:
        link = Link(link.latency_ns, link.bytes_per_ns, f"measured: {len(fit)} collective transfers between the "
                    f"job's processes ({'one host' if hosts <= 1 else f'{hosts} hosts'})")
    errors = [abs(link.time_ns(b) - t) / t for b, t in check] if link is not None else []
    return LinkFit(link, len(fit), len(check), median(errors) if errors else None,
                   min(errors) if errors else None, max(errors) if errors else None, hosts)
