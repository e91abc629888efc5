"""Ranks of one job side by side: per-rank summaries, stragglers, collective wait, overlap.

Input: a job folder (tracer/job.py), one trace per process. A process takes part when it
recorded ``dfc:process_rank`` (or its launcher's RANK); the others (the launcher, helper
processes) are listed but not compared.

* **Collectives** are joined across ranks by ``seq``: the k-th collective a rank issues is the
  k-th on every rank, because every rank must issue its collectives in one order. A rank's
  **arrival** is the start of its collective node, on the wall clock (each trace's clock offset
  applied; the processes of one host share one offset, so their times compare exactly).
* **Straggler**: the rank that arrives last; ``skew`` is last minus first arrival, ``late_by``
  last minus the one before it.
* **Wait**: at each collective a rank waits from its own arrival until the last rank arrives.
* **Overlap**: the share of a rank's communication time (collective nodes and the backend's
  communication spans) during which one of its compute nodes runs too.
* **Critical path** across processes, over tensor, thread-order and collective edges, with each
  node's slack (:mod:`tc_analyses.analyses.job_graph`).
* **Transfer cost** between the processes, fitted on half the collectives and checked on the
  other half (:mod:`tc_analyses.analyses.comm_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from tc_analyses.analyses.comm_cost import LinkFit, fit_job_link, transfer_samples
from tc_analyses.analyses.job_graph import CriticalPath, RankNodes, build_job_graph, critical_path
from tc_analyses.analyses.result import Finding, Options, Result
from tc_analyses.analyses.units import fmt_ns
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.model.intervals import union_ns

COMM_PREFIXES = ("c10d::", "gloo:", "nccl:")


@dataclass(frozen=True)
class RankSummary:
    """One process of the job."""

    rank: int | None  # None: not a rank (the launcher, a helper process)
    host: str
    pid: int | None
    trace: str
    nodes: int
    compute_ns: int  # union of its compute nodes' intervals
    comm_ns: int  # union of its communication nodes' intervals
    overlap: float | None  # share of comm_ns during which compute runs; None without comm
    collectives: int
    wait_ns: int  # summed over the collectives matched across ranks
    last_at: int  # collectives at which it arrived last
    world_size: int | None = None  # as the process recorded it (dfc:process_rank, its launcher, Kineto)
    first_ns: int | None = None  # wall clock of its first node's start and its last node's end
    last_ns: int | None = None


@dataclass(frozen=True)
class Collective:
    """One collective joined across the ranks."""

    seq: int
    kind: str
    bytes: int  # payload on the first rank
    arrivals_ns: dict[int, int]  # rank -> wall-clock arrival (ns since the epoch)
    last_rank: int
    skew_ns: int  # last arrival - first arrival
    late_by_ns: int  # last arrival - the arrival before it


@dataclass(frozen=True)
class JobRanks:
    job: str
    processes: list[RankSummary]
    collectives: list[Collective]
    mismatch: str  # why joining stopped early ("" when every collective matched)
    critical_path: CriticalPath | None = None
    link: LinkFit | None = None  # the transfer cost between the processes, fitted on even seqs
    apart: tuple[str, ...] = ()  # why the traces may not be one run's ranks (empty when they are)
    in_time: bool = True  # the ranks' traces overlap in time (else arrivals across them compare nothing)

    @property
    def ranks(self) -> list[RankSummary]:
        return [p for p in self.processes if p.rank is not None]


@dataclass
class _Process:
    summary: dict[str, Any]
    collectives: list[tuple[int, str, int, int]]  # seq, kind, bytes, wall-clock arrival
    nodes: RankNodes


@dataclass(frozen=True)
class ProcessRef:
    """One process trace of the job, as it is sent to wherever it is read (a Dask worker)."""

    path: str
    rank: int | None
    host: str
    pid: int | None
    world_size: int | None = None


def read_process(ref: ProcessRef) -> _Process:
    """What the comparison needs of one process trace (a job's per-process work: it may run on a
    Dask worker, and only its answer, lists of numbers and names, comes back)."""
    from tc_analyses.reader import read_trace

    return _read_process(read_trace(ref.path), ref.path, ref.rank, ref.host, ref.pid, ref.world_size)


def _read_process(trace: Any, path: str, rank: int | None, host: str, pid: int | None,
                  world_size: int | None = None) -> _Process:
    offset = trace.metadata.clock_offset_ns
    ranks = trace.table("process_rank")
    if len(ranks):
        rank = int(ranks["rank"][0])
        if int(ranks["world_size"][0]) not in (0, 0xFFFFFFFF):
            world_size = int(ranks["world_size"][0])
    begins, ends = trace.table("node_begin"), trace.table("node_end")
    ids = begins["node_id"].astype(np.int64)
    start = begins["timestamp"].astype(np.int64)
    end_of = dict(zip(ends["node_id"].tolist(), ends["timestamp"].tolist()))
    end = np.array([end_of.get(i, s) for i, s in zip(ids.tolist(), start.tolist())], dtype=np.int64)
    ops = begins.text("op")
    comm = np.array([isinstance(op, str) and op.startswith(COMM_PREFIXES) for op in ops], dtype=bool)
    comm_ns = union_ns(start[comm], end[comm])
    compute_ns = union_ns(start[~comm], end[~comm])
    both = union_ns(start, end)
    overlap = (comm_ns + compute_ns - both) / comm_ns if comm_ns else None
    table = trace.table("collective")
    start_of = dict(zip(ids.tolist(), start.tolist()))
    issued = sorted((int(seq), str(kind), int(size), start_of.get(int(node), int(ts)) + offset, int(node))
                    for node, seq, kind, size, ts in zip(table["node_id"].tolist(), table["seq"].tolist(),
                                                         table.text("kind").tolist(), table["bytes"].tolist(),
                                                         table["timestamp"].tolist()))
    collectives = [c[:4] for c in issued]
    summary = dict(rank=rank, host=host, pid=pid, trace=path, nodes=len(ids), compute_ns=compute_ns,
                   comm_ns=comm_ns, overlap=overlap, collectives=len(collectives), world_size=world_size,
                   first_ns=int(start.min()) + offset if len(ids) else None,
                   last_ns=int(end.max()) + offset if len(ids) else None)
    edges = trace.table("tensor_edge")
    nodes = RankNodes(-1 if rank is None else rank, ids.tolist(), begins["tid"].tolist(), (start + offset).tolist(),
                      (end + offset).tolist(), [str(op) for op in ops], [str(n) for n in begins.text("name")],
                      list(zip(edges["producer"].tolist(), edges["consumer"].tolist())),
                      [(seq, kind, node) for seq, kind, _, _, node in issued])
    return _Process(summary, collectives, nodes)


def join_collectives(per_rank: dict[int, list[tuple[int, str, int, int]]]) -> tuple[list[Collective], str]:
    """Join the ranks' collectives by seq, up to the first seq not every rank has or where kinds disagree."""
    by_seq = {rank: {c[0]: c for c in items} for rank, items in per_rank.items()}
    seqs = sorted(set.intersection(*(set(s) for s in by_seq.values()))) if by_seq else []
    joined: list[Collective] = []
    mismatch = ""
    for seq in seqs:
        entries = {rank: found[seq] for rank, found in by_seq.items()}
        kinds = {e[1] for e in entries.values()}
        if len(kinds) > 1:
            mismatch = f"at seq {seq} the ranks issued different collectives ({', '.join(sorted(kinds))})"
            break
        arrivals = {rank: e[3] for rank, e in entries.items()}
        order = sorted(arrivals, key=lambda r: (arrivals[r], r))
        last = order[-1]
        late_by = arrivals[last] - arrivals[order[-2]] if len(order) > 1 else 0
        first_bytes = entries[order[0]][2]
        joined.append(Collective(seq, kinds.pop(), first_bytes, arrivals, last, arrivals[last] - arrivals[order[0]],
                                 late_by))
    counts = {rank: len(items) for rank, items in per_rank.items()}
    if not mismatch and len(set(counts.values())) > 1:
        mismatch = "the ranks recorded different numbers of collectives (" + ", ".join(
            f"rank {r}: {n}" for r, n in sorted(counts.items())) + "): a rank's trace ends early"
    return joined, mismatch


def _not_ranked(job: Any, ranks: int) -> str:
    """Why `ranks` cannot compare this job, and what works on it instead."""
    from collections import Counter

    from tc_analyses.reader.job import plural, roles

    if len(job.processes) < 2:
        return (f"{job.path}: one process trace; comparing ranks needs a job of two or more "
                "(dfcompass record -o JOB -- torchrun ...)")
    counts = Counter(roles(job.processes).values())
    held = ", ".join(plural(role, n) for role, n in sorted(counts.items()))
    what = "no rank" if ranks == 0 else "one rank"
    return (f"{job.path}: {what} among its {len(job.processes)} processes ({held}): not a distributed job; "
            "`ranks` compares the ranks of a torchrun or mp.spawn job. Use `dfcompass analyze` on the folder, or "
            "any single-trace command (it reads the main process; --process picks another)")


def analyse(job: Any) -> JobRanks:
    """The job's ranks compared (`job`: :class:`tc_analyses.inputs.JobInputs`). Each process trace
    is read by ``job.map`` (here, or as Dask tasks); the comparison runs here."""
    processes = job.map(read_process, [ProcessRef(str(p.path.resolve()), p.rank, p.host, p.pid,
                                                  p.world_size) for p in job.processes])
    for process, p in zip(processes, job.processes):  # reported as the user named it
        process.summary["trace"] = str(p.path)
    ranked = {p.summary["rank"]: p for p in processes if p.summary["rank"] is not None}
    if len(ranked) < 2:
        raise AnalysisUnavailable(_not_ranked(job, len(ranked)))
    apart, in_time = _apart([p.summary for p in processes if p.summary["rank"] is not None], ranked)
    collectives, mismatch = join_collectives({rank: p.collectives for rank, p in ranked.items()})
    wait = {rank: 0 for rank in ranked}
    last = {rank: 0 for rank in ranked}
    for c in collectives:
        latest = c.arrivals_ns[c.last_rank]
        for rank, at in c.arrivals_ns.items():
            wait[rank] += latest - at
        last[c.last_rank] += 1
    summaries = [RankSummary(**p.summary, wait_ns=wait.get(p.summary["rank"], 0),
                             last_at=last.get(p.summary["rank"], 0)) for p in processes]
    summaries.sort(key=lambda s: (s.rank is None, s.rank or 0, s.pid or 0))
    rank_nodes = [p.nodes for p in ranked.values()]
    graph = build_job_graph(rank_nodes, [(c.seq, c.kind, c.last_rank) for c in collectives])
    hosts = len({p.summary["host"] for p in ranked.values()})
    link = fit_job_link(transfer_samples(rank_nodes, collectives), hosts)
    return JobRanks(str(job.path), summaries, collectives, mismatch, critical_path(graph), link, apart, in_time)


def _apart(ranks: list[dict[str, Any]], kept: dict[int, _Process]) -> tuple[tuple[str, ...], bool]:
    """Why these rank traces may not be one run's (a rank claimed twice, world sizes that differ or
    that the ranks do not fit, spans that do not overlap in time; empty when none of these), and
    whether their spans overlap in time."""
    reasons = []
    claimed: dict[int, list[str]] = {}
    for s in ranks:
        claimed.setdefault(s["rank"], []).append(s["trace"])
    for rank, traces in sorted(claimed.items()):
        if len(traces) > 1:
            reasons.append(f"rank {rank} is claimed by {len(traces)} traces ({', '.join(traces)}): they are not one "
                           f"run's; only {kept[rank].summary['trace']} is compared")
    kept_ranks = [p.summary for p in kept.values()]
    sizes = {s["rank"]: s["world_size"] for s in kept_ranks if s["world_size"] is not None}
    if len(set(sizes.values())) > 1:
        reasons.append("the ranks recorded different world sizes (" + ", ".join(
            f"rank {r}: {n}" for r, n in sorted(sizes.items())) + "): they are not one job's")
    elif sizes:
        world = next(iter(sizes.values()))
        outside = sorted(r for r in kept if r >= world)
        if outside:
            reasons.append(f"rank {', '.join(map(str, outside))} of a world of {world}: not one job's ranks")
    spans = [(s["first_ns"], s["last_ns"], s["rank"]) for s in kept_ranks if s["first_ns"] is not None]
    in_time = True
    if len(spans) > 1:
        late_first, late_rank = max((first, rank) for first, _, rank in spans)
        early_last, early_rank = min((last, rank) for _, last, rank in spans)
        if late_first > early_last:
            in_time = False
            reasons.append(f"the traces do not overlap in time: rank {late_rank} begins {fmt_ns(late_first - early_last)}"
                           f" after rank {early_rank} ends; they are not one run's, and arrival times across them "
                           "mean nothing")
    return tuple(reasons), in_time


def findings(r: JobRanks) -> tuple[Finding, ...]:
    found: list[Finding] = []
    apart = [Finding("not_one_run", 0, f"these traces may not belong together: {reason}") for reason in r.apart]
    if r.collectives and r.in_time:  # arrivals of traces that do not overlap compare nothing
        # The straggler is the rank that kept the others waiting longest, not the one last most
        # often: a rank 20 ms late at every all-reduce outweighs one a few µs late at the set-up.
        lateness = {s.rank: sum(c.late_by_ns for c in r.collectives if c.last_rank == s.rank) for s in r.ranks}
        worst = max(r.ranks, key=lambda s: (lateness[s.rank], s.last_at, -(s.rank or 0)))
        skews = [c.skew_ns for c in r.collectives if c.last_rank == worst.rank]
        waited = sum(s.wait_ns for s in r.ranks if s.rank != worst.rank)
        found.append(Finding("straggler", waited,
                             f"rank {worst.rank} arrived last at {worst.last_at} of {len(r.collectives)} collectives, "
                             f"by {fmt_ns(int(median(skews)))} (median; {fmt_ns(min(skews))}..{fmt_ns(max(skews))}); "
                             f"the other ranks waited {fmt_ns(waited)} for it in all. Balance the work of rank "
                             f"{worst.rank} (its data, its host's load) or overlap its compute with communication."))
    for s in r.ranks:
        # Exposed communication beyond the wait for late ranks: what better overlap could hide.
        exposed = int(s.comm_ns * (1 - s.overlap)) - s.wait_ns if s.overlap is not None else 0
        if s.overlap is not None and s.overlap < 0.5 and exposed > 0:
            found.append(Finding("low_overlap", exposed,
                                 f"rank {s.rank}: {s.overlap:.0%} of its {fmt_ns(s.comm_ns)} of communication overlaps "
                                 f"compute; {fmt_ns(exposed)} of it is exposed beyond the wait for other ranks (DDP "
                                 "overlaps the gradient all-reduce with backward through its buckets: check "
                                 "bucket_cap_mb and find_unused_parameters)."))
    path = r.critical_path
    if path is not None:
        share = ", ".join(f"rank {rank} {ns / path.busy_ns:.0%}" for rank, ns in path.by_rank_ns.items()) if path.busy_ns else "-"
        found.append(Finding("critical_path", 0,
                             f"the job's critical path ({fmt_ns(path.length_ns)}, {len(path.steps)} nodes, "
                             f"{fmt_ns(path.busy_ns)} in nodes, the rest gaps between them) crosses between ranks "
                             f"{path.crossings} times at collectives; its node time by rank: {share}. Shortening work "
                             "on the path shortens the job; work with slack does not (--format json lists each "
                             "node's slack)."))
    if r.mismatch:
        found.append(Finding("mismatch", 0, f"collectives joined up to where they stop matching: {r.mismatch}"))
    return tuple(apart) + tuple(sorted(found, key=lambda f: -f.impact_ns))


def run(inputs: Any, options: Options) -> Result:
    """The registry's entry point; `inputs` is a JobInputs, or one trace's inputs (not available)."""
    if not hasattr(inputs, "processes"):
        raise AnalysisUnavailable(f"{Path(inputs.path)}: one process trace; `dfcompass ranks` reads a job folder "
                                  "(dfcompass record -o JOB -- torchrun ...)")
    result = analyse(inputs)
    return Result("ranks", result.job, result, findings(result))
