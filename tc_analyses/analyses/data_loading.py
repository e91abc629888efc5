"""Data loading beside a plan: how long the main process waited for batches, and how busy its
DataLoader workers were.

A plan of the main process's ops (``parallelism``, ``recommend-placement``) cannot shorten the
time a step spends waiting for the next batch: when that wait is a large share of the run, the
step is loader-bound and the plan's speedup does not reach the step. The wait is the time inside
torch's ``enumerate(DataLoader)#...__next__`` scope, which the recorder keeps as an annotation on
the main thread; the workers' busy time is the union of their op intervals (their own traces in
the job folder). Both are measured, nothing is modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.intervals import union_ns
from tc_analyses.reader.fast import read_trace
from tc_analyses.errors import DfcompassError
from tc_analyses.reader.job import WORKER, job_traces_in, roles
from tc_analyses.reader.metadata import read_metadata
from tracer import schema

_NEXT_BATCH = "enumerate(DataLoader)#"
# A wait above this share of the main process's span is called loader-bound.
LOADER_BOUND_SHARE = 0.2


@dataclass(frozen=True)
class DataLoading:
    wait_ns: int  # the main process inside DataLoader __next__ (union over its threads)
    batches: int  # how many __next__ calls (the batches and the call that ends each epoch)
    span_ns: int  # the main process from its first op or batch to its last
    workers: int
    workers_busy_ns: int  # each worker's union of op intervals, summed over the workers

    @property
    def wait_share(self) -> float:
        return self.wait_ns / self.span_ns if self.span_ns else 0.0

    def text(self) -> str:
        bound = (" The run is loader-bound: a plan of the main process's ops cannot speed up that wait."
                 if self.wait_share >= LOADER_BOUND_SHARE else "")
        workers = f"{self.workers} DataLoader workers were busy {self.workers_busy_ns / 1e6:.1f} ms in all (measured)"
        if not self.batches:
            return (f"data loading: {workers}; the main process's wait for batches is not in the trace (no "
                    "DataLoader __next__ scope: recorded before dfcompass kept record_function scopes?)")
        return (f"data loading: the main process waited {self.wait_ns / 1e6:.1f} ms in {self.batches} DataLoader "
                f"__next__ calls "
                f"({self.wait_share:.0%} of its {self.span_ns / 1e6:.1f} ms from first op to last); {workers}.{bound}")


def batch_wait(activity: Activity) -> tuple[int, int]:
    """The main process's time inside DataLoader ``__next__`` (ns, union) and the number of calls."""
    table = activity.annotations
    if not len(table):
        return 0, 0
    which = np.nonzero(table.codes_where("name", lambda name: name.startswith(_NEXT_BATCH)))[0]
    rows = table.take(which)
    return union_ns(rows.column("start"), rows.column("end")), len(rows)


def of_job(trace: str | Path, activity: Activity) -> DataLoading | None:
    """The data loading of the process at `trace`, when it is the main process of a job folder with
    DataLoader workers (None otherwise: a lone trace, or a job without workers)."""
    path = Path(trace)
    if not (path / "metadata").is_file() or schema.ENV_PPID not in read_metadata(path).env:
        return None  # not a process of a recorded job
    processes = job_traces_in(path.parent)
    me = next((p for p in processes if p.path == path), None)
    role = roles(processes)
    # Its own workers: a rank's, not its neighbours'.
    workers = [p for p in processes if role[p.path] == WORKER and me is not None and p.host == me.host
               and p.ppid == me.pid]
    if not workers:
        return None
    busy = 0
    for worker in workers:
        try:
            nodes = read_activity(read_trace(worker.path)).nodes
        except DfcompassError:  # a damaged worker trace (a killed worker): its time is not counted
            continue
        busy += union_ns(nodes.column("start"), nodes.column("end"))
    wait, batches = batch_wait(activity)
    nodes, annotations = activity.nodes, activity.annotations
    # From the first op or batch to the last: the training, not the interpreter's start-up.
    starts = [int(t.column("start").min()) for t in (nodes, annotations) if len(t)]
    ends = [int(t.column("end").max()) for t in (nodes, annotations) if len(t)]
    span = max(ends) - min(starts) if starts else 0
    return DataLoading(wait, batches, span, len(workers), busy)
