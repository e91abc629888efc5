"""A job: the traces of one run's processes, side by side in one folder (see tracer/job.py).

A single trace directory is a job of one. Commands that analyse one trace read the main process of
a job folder (:func:`choose_process`: rank 0, else the process ``record`` started), or the one
named with ``--process``; ``dfcompass ranks`` and ``analyze JOB`` read a whole job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from tc_analyses.errors import ConfigurationError
from tc_analyses.reader.metadata import find_traces, read_metadata
from tracer import schema


@dataclass(frozen=True)
class ProcessTrace:
    """One process's trace in a job, with what its metadata says about its place in the job."""

    path: Path
    host: str
    pid: int | None
    rank: int | None  # from the launcher's RANK (or a Kineto file's distributedInfo)
    world_size: int | None
    ppid: int | None = None  # the parent process (traces recorded since the job roles)
    recorded_role: str = ""  # what the recorder knew the process was for (schema.ENV_PROCESS_ROLE)
    env: Mapping[str, object] = field(default_factory=dict, compare=False)  # the trace's environment, whole

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"{self.host or '?'} pid {self.pid}"

    def has_nodes(self) -> bool:
        """Whether any dataflow node was recorded (from file sizes: no need to read the trace)."""
        return self.node_bytes() > 0

    def node_bytes(self) -> int:
        """Bytes of dataflow node events: how much op work the process recorded, without reading it."""
        prefix = schema.BY_SHORT["node_begin"].short
        return sum(p.stat().st_size for p in self.path.iterdir() if p.is_file() and p.name.startswith(prefix))


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def job_traces(root: str | Path) -> list[ProcessTrace]:
    """The process traces at or below `root`, ordered by rank, then host and pid (numerically)."""
    found = []
    for path in find_traces(root):
        meta = read_metadata(path)
        env = meta.env
        rank = _int(env.get("rank", env.get("kineto_rank")))
        role = str(env.get(schema.ENV_PROCESS_ROLE, ""))
        if role == schema.DATA_LOADER_WORKER:
            rank = None  # a rank's worker inherits its RANK (and, forked, its process group): not a rank
        elif rank is None:
            rank = _recorded_rank(path, meta.uuid)
        found.append(ProcessTrace(path, str(env.get("hostname", "")), _int(env.get("pid")), rank,
                                  _int(env.get("world_size", env.get("kineto_world_size"))),
                                  _int(env.get(schema.ENV_PPID)), role, env))
    return sorted(found, key=lambda t: (t.rank is None, t.rank or 0, t.host, t.pid or 0, str(t.path)))


def _recorded_rank(path: Path, uuid: str) -> int | None:
    """The rank from the trace's dfc:process_rank event (torch.distributed was initialised without a
    launcher's RANK: mp.spawn), read from that one small stream file, not the whole trace."""
    import uuid as uuid_mod

    from tc_analyses.errors import TraceError
    from tc_analyses.reader.streams import read_stream

    prefix = schema.BY_SHORT["process_rank"].short
    for stream in sorted(p for p in path.iterdir() if p.name.startswith(prefix) and p.is_file()):
        try:
            _, _, chunks = read_stream(stream, uuid_mod.UUID(uuid).bytes if uuid else None)
        except (TraceError, OSError, ValueError):
            return None  # a damaged stream: the commands that read the trace say so
        for records in chunks:
            if len(records):
                return int(records["rank"][0])
    return None


def job_traces_in(folder: Path) -> list[ProcessTrace]:
    """The process traces directly in `folder` (a recorded job's layout), without walking below it."""
    found = [p for p in folder.iterdir() if (p / "metadata").is_file()] if folder.is_dir() else []
    return [t for path in found for t in job_traces(path)]


# The roles of a job's processes, as said to users.
MAIN, RANK, LAUNCHER, WORKER, CHILD, NO_OP = ("main process", "rank", "launcher", "DataLoader worker", "child process",
                                              "process with no op")
OTHER = "trace not of the run"  # in a recorded job's folder, a trace without a ppid (a plan's predicted trace)


def plural(role: str, count: int) -> str:
    """`2 DataLoader workers`, `1 main process`, `3 child processes`."""
    if count == 1:
        return f"1 {role}"
    return f"{count} " + (role.replace("process", "processes") if "process" in role else role + "s")


def roles(processes: list[ProcessTrace]) -> dict[Path, str]:
    """What each process of a job is: a rank, a launcher (no op of its own, children in the job),
    a DataLoader worker, the main process (its parent is not in the job) or another child."""
    pids = {(p.host, p.pid) for p in processes if p.pid is not None}
    recorded = any(p.ppid is not None for p in processes)
    parents = {(p.host, p.ppid) for p in processes if p.ppid is not None}
    found = {}
    for p in processes:
        ops = p.has_nodes()
        if recorded and p.ppid is None and p.rank is None and p.recorded_role != schema.DATA_LOADER_WORKER:
            role = OTHER  # written there later (recommend-placement -o JOB/plan), not by `record`
        elif p.rank is not None:
            role = RANK
        elif p.recorded_role == schema.DATA_LOADER_WORKER:
            role = WORKER
        elif not ops and (p.host, p.pid) in parents:
            role = LAUNCHER
        elif p.ppid is not None and (p.host, p.ppid) in pids:
            role = CHILD
        else:
            role = MAIN if ops or p.ppid is not None else NO_OP
        found[p.path] = role
    return found


def describe(process: ProcessTrace, role: str) -> str:
    """`rank 1 (pid 4242)`, `DataLoader worker (pid 4250)`, `main (pid 4200)`."""
    pid = f"pid {process.pid}" if process.pid is not None else process.path.name
    return f"rank {process.rank} ({pid})" if role == RANK else f"{role} ({pid})"


def role_labels(processes: list[ProcessTrace]) -> list[str]:
    """Each process as users see it in a job's reports: `rank 0 (pid 12)`, `DataLoader worker (pid 14)`."""
    role = roles(processes)
    return [describe(p, role[p.path]) for p in processes]


def _order(process: ProcessTrace, role: str) -> tuple[int, int, int]:
    """Listing order: ranks, main, other children, launchers, workers; then pid, numerically."""
    rank = {RANK: 0, MAIN: 1, CHILD: 2, LAUNCHER: 3, NO_OP: 4, WORKER: 5, OTHER: 6}[role]
    return rank, process.rank if process.rank is not None else 0, process.pid or 0


@dataclass(frozen=True)
class Chosen:
    """The process trace a single-trace command reads in a job folder, and why."""

    path: Path
    notice: str  # one line for the user; "" when the path was a trace already or a job of one


def choose_process(path: str | Path, choice: str | None = None) -> Chosen:
    """The trace to read at `path`: `path` itself when it is a trace; in a job folder the process
    named by `choice` (``main``, ``rank N``, a pid or a folder name), by default the main one:
    rank 0 of a distributed job, else the process `record` started, else the one with most ops."""
    path = Path(path)
    if (path / "metadata").is_file() or not path.is_dir():
        if choice not in (None, "main"):
            raise ConfigurationError(f"{path}: --process {choice} needs a job folder; this is one trace")
        return Chosen(path, "")  # a trace, or something the reader will name as missing
    processes = job_traces(path)
    if not processes:
        return Chosen(path, "")  # the reader says that no metadata is there
    if len(processes) == 1 and choice in (None, "main"):
        return Chosen(processes[0].path, "")
    role = roles(processes)
    listed = sorted(processes, key=lambda p: _order(p, role[p.path]))
    picked = _pick(path, listed, role, choice)
    how = "as --process said" if choice not in (None, "main") else (
        "the main process" if role[picked.path] != MAIN else "")
    subject = describe(picked, role[picked.path])
    notice = (f"{path}: a job of {len(processes)} processes; reading {'the ' * (role[picked.path] == MAIN)}{subject}"
              f"{', ' + how if how else ''} (also: {_others(listed, role, picked)}; --process main|rank N|PID "
              "picks another)")
    return Chosen(picked.path, notice)


def _others(listed: list[ProcessTrace], role: dict[Path, str], picked: ProcessTrace) -> str:
    """The other processes grouped by role: `rank 1 (pid 12), 2 DataLoader workers (pids 14, 15)`."""
    groups: dict[str, list[ProcessTrace]] = {}
    for p in listed:
        if p is not picked:
            groups.setdefault(f"rank {p.rank}" if role[p.path] == RANK else role[p.path], []).append(p)
    parts = []
    for name, members in groups.items():
        pids = ", ".join(str(p.pid) if p.pid is not None else p.path.name for p in members[:8])
        more = f" and {len(members) - 8} more" if len(members) > 8 else ""
        parts.append(f"{name} (pid {pids})" if len(members) == 1 else f"{plural(name, len(members))} (pids {pids}{more})")
    return ", ".join(parts)


def _pick(path: Path, listed: list[ProcessTrace], role: dict[Path, str], choice: str | None) -> ProcessTrace:
    if choice in (None, "main"):
        ranked = [p for p in listed if role[p.path] == RANK and p.has_nodes()]
        mains = [p for p in listed if role[p.path] == MAIN]
        candidates = (ranked[:1] or mains or [p for p in listed if role[p.path] == CHILD]
                      or [p for p in listed if role[p.path] != OTHER] or listed)
        return max(candidates, key=lambda p: (p in ranked or p in mains, p.node_bytes()))
    text = choice.strip()
    words = text.split()
    matches: list[ProcessTrace] = []
    if len(words) == 2 and words[0] == "rank" and words[1].isdigit():
        matches = [p for p in listed if p.rank == int(words[1])]
    elif text.isdigit():
        matches = [p for p in listed if p.pid == int(text)]
    if not matches:
        matches = [p for p in listed if p.path.name == text or str(p.path.relative_to(path)) == text]
    if not matches:
        known = ", ".join(describe(p, role[p.path]) for p in listed[:8])
        raise ConfigurationError(f"{path}: no process {text!r} in this job (it holds {known}); "
                                 "give --process main, rank N, a pid or a process folder")
    return matches[0]


def single_trace(path: str | Path, choice: str | None = None) -> Path:
    """`path` itself when it is a trace; in a job folder the main process's trace (or `choice`)."""
    return choose_process(path, choice).path


def unique_names(names: list[str]) -> list[str]:
    """`names` with repeats numbered (a, a.1, a.2): one folder per item."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}.{n}")
    return out
