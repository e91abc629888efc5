"""A job: the traces of one run's processes, side by side in one folder (see tracer/job.py).

A single trace directory is a job of one. Commands that analyse one trace accept a job folder
that holds exactly one; ``dfcompass ranks`` reads a whole job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"{self.host or '?'} pid {self.pid}"

    def has_nodes(self) -> bool:
        """Whether any dataflow node was recorded (from file sizes: no need to read the trace)."""
        prefix = schema.BY_SHORT["node_begin"].short
        return any(p.name.startswith(prefix) and p.stat().st_size > 0 for p in self.path.iterdir() if p.is_file())


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def job_traces(root: str | Path) -> list[ProcessTrace]:
    """The process traces at or below `root`, ordered by rank, then host and pid."""
    found = []
    for path in find_traces(root):
        env = read_metadata(path).env
        rank = _int(env.get("rank", env.get("kineto_rank")))
        found.append(ProcessTrace(path, str(env.get("hostname", "")), _int(env.get("pid")), rank,
                                  _int(env.get("world_size"))))
    return sorted(found, key=lambda t: (t.rank is None, t.rank or 0, t.host, t.pid or 0, str(t.path)))


def single_trace(path: str | Path) -> Path:
    """`path` itself when it is a trace; the only trace of a job folder; else a clear error."""
    path = Path(path)
    if (path / "metadata").is_file() or not path.is_dir():
        return path  # a trace, or something the reader will name as missing
    traces = find_traces(path)
    if len(traces) == 1:
        return traces[0]
    if not traces:
        return path  # the reader says that no metadata is there
    names = ", ".join(str(t.relative_to(path)) for t in traces[:4]) + (", ..." if len(traces) > 4 else "")
    raise ConfigurationError(f"{path}: a job of {len(traces)} process traces ({names}); give one of them, "
                             f"or analyse the whole job with `dfcompass ranks {path}`")


def unique_names(names: list[str]) -> list[str]:
    """`names` with repeats numbered (a, a.1, a.2): one folder per item."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append(name if n == 0 else f"{name}.{n}")
    return out
