"""Shared helpers for the dfcompass tests (imported as ``tests.helpers``)."""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import tracer

from tracer import schema
from tracer.tsdl import PACKET_PREAMBLE_SIZE

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
BABELTRACE2 = shutil.which("babeltrace2") or ("/usr/bin/babeltrace2" if Path("/usr/bin/babeltrace2").exists() else None)
WALL_OFFSET = 1_700_000_000_000_000_000

# Strings that break naive writers, escapers, regexes, XML and shells.
HOSTILE = (
    "<&\"'>",
    ".*+?[](){}|^$\\",
    "h\u00e9llo w\u00f6rld \u2603 \u4e2d\u6587 \U0001F600\U0001F680",
    "lone \ud800 and \udfff surrogates",
    "ctl \x00 nul \n newline \t tab \x1b esc \x7f del",
    "back\\slash \\x41 \\u2603 \\\\",
    "%s %d {0} ${HOME} `id`",
    "x" * 10_000,
    "",
)

try:
    import bt2  # noqa: F401

    HAVE_BT2 = True
except ImportError:  # pragma: no cover - depends on the machine
    HAVE_BT2 = False

requires_babeltrace2 = pytest.mark.skipif(BABELTRACE2 is None, reason="babeltrace2 CLI not installed")
requires_bt2 = pytest.mark.skipif(not HAVE_BT2, reason="bt2 (python3-bt2) not importable")


class CountingClock:
    """A deterministic, thread-safe trace clock: start, start+step, ... (itertools.count is atomic)."""

    name = "monotonic"

    def __init__(self, start: int = 1_000_000, step: int = 1_000, wall_offset: int = WALL_OFFSET) -> None:
        counter = itertools.count(start, step)
        self.now = counter.__next__
        self.wall_offset = wall_offset

    def offset_to_wall_ns(self) -> int:
        return self.wall_offset


def dfcompass_cmd() -> list[str]:
    """How to run the dfcompass CLI as a subprocess, with the Python that runs the tests."""
    exe = Path(sys.executable).parent / "dfcompass"
    if exe.exists():
        return [str(exe)]
    venv_exe = REPO_ROOT / ".venv" / "bin" / "dfcompass"
    if venv_exe.exists():
        return [str(venv_exe)]
    return [sys.executable, "-m", "tc_analyses.cli"]


def subprocess_env() -> dict[str, str]:
    """Environment for child Pythons: the repo importable, no stray recording variables."""
    env = dict(os.environ)
    env.pop("DFCOMPASS_RECORD_DIR", None)
    env.pop("DFCOMPASS_RECORD_OVERWRITE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_babeltrace2(*args: str | os.PathLike[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert BABELTRACE2 is not None
    return subprocess.run([BABELTRACE2, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          errors="replace")


# ---------------------------------------------------------------- canonical event lists
def _freeze(fields: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(fields.items()))


def canonical_fast(trace: Any) -> list[tuple[int, str, tuple[tuple[str, Any], ...]]]:
    """(timestamp, name, sorted payload items) for every event the fast reader sees, sorted."""
    return sorted((ts, name, _freeze(fields)) for ts, name, fields in trace.events())


def canonical_bt2(path: str | os.PathLike[str]) -> tuple[list[tuple[int, str, tuple[tuple[str, Any], ...]]], list[Any]]:
    """Events (canonical, sorted) and Discarded records of a trace read through bt2."""
    from tc_analyses.reader import bt2_source

    events, discarded = [], []
    for item in bt2_source.iter_trace(path):
        if isinstance(item, bt2_source.Event):
            events.append((item.timestamp, item.name, _freeze(dict(item.fields))))
        else:
            discarded.append(item)
    return sorted(events), discarded


# ---------------------------------------------------------------- packet-level checks
_STRING_HEAD = struct.Struct("<HQI")


def parse_string_defs(body: bytes) -> list[tuple[int, int, int, bytes]]:
    """(id, timestamp, sid, raw value) of each dfc:string_def record in a packet body."""
    out, pos = [], 0
    while pos < len(body):
        event_id, ts, sid = _STRING_HEAD.unpack_from(body, pos)
        nul = body.index(b"\0", pos + _STRING_HEAD.size)
        out.append((event_id, ts, sid, body[pos + _STRING_HEAD.size : nul]))
        pos = nul + 1
    return out


def class_of_stream(path: Path) -> schema.EventClass:
    return schema.BY_SHORT[path.name.partition("-")[0]]


def packets_of(path: Path) -> list[Any]:
    """The packets of one stream file, as the fast reader's walker sees them."""
    from tc_analyses.reader.fast import walk_packets
    from tc_analyses.reader.metadata import read_metadata

    meta = read_metadata(path.parent)
    uuid_bytes = bytes.fromhex(meta.uuid.replace("-", ""))
    data = memoryview(path.read_bytes())
    return list(walk_packets(path, data, uuid_bytes))


def check_packets(trace_dir: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Assert the CTF packet rules Trace Compass and babeltrace2 rely on, for every stream file.

    Each packet's [timestamp_begin, timestamp_end] covers its events, packets of one stream do not
    overlap and come in time order, timestamps never go back within a stream, the body is a whole
    number of records of the stream's single class, and content_size == packet_size (no padding).
    Returns {stream file name: (packets, events)}.
    """
    from tc_analyses.reader.fast import DTYPES, stream_files

    summary = {}
    streams = stream_files(Path(trace_dir))
    assert streams, f"{trace_dir}: no stream file (a job folder? pass one process's trace)"
    for path in streams:
        cls = class_of_stream(path)
        data = path.read_bytes()
        prev_end = None
        prev_ts = None
        events = 0
        packets = packets_of(path)
        for packet in packets:
            where = f"{path.name} packet at byte {packet.offset}"
            assert packet.ts_begin <= packet.ts_end, where
            if prev_end is not None:
                assert prev_end <= packet.ts_begin, f"{where}: overlaps the previous packet"
            prev_end = packet.ts_end
            content_bits = int.from_bytes(data[packet.offset + 40 : packet.offset + 48], "little")
            assert content_bits == packet.packet_size * 8, where
            body = data[packet.body_start : packet.body_start + packet.body_len]
            if cls.is_variable:
                records = parse_string_defs(body)
                ids = [r[0] for r in records]
                stamps = [r[1] for r in records]
            else:
                assert len(body) % cls.record_size == 0, where
                array = np.frombuffer(body, DTYPES[cls.id])
                ids = array["id"].tolist()
                stamps = array["timestamp"].tolist()
            assert set(ids) <= {cls.id}, where
            for ts in stamps:
                assert packet.ts_begin <= ts <= packet.ts_end, f"{where}: event at {ts} outside the packet"
                if prev_ts is not None:
                    assert prev_ts <= ts, f"{where}: time goes back ({prev_ts} -> {ts})"
                prev_ts = ts
            events += len(stamps)
        summary[path.name] = (len(packets), events)
    return summary


def check_string_defs(trace: Any) -> None:
    """Every sid used is defined once, by a dfc:string_def no later than its first use."""
    defs = trace.table("string_def")
    sids = defs["sid"].tolist()
    assert len(sids) == len(set(sids)), "a string id is defined twice"
    def_ts = dict(zip(sids, defs["timestamp"].tolist()))
    assert sorted(sids) == list(range(len(sids))), "string ids are not dense from 0"
    for name, table in trace.tables.items():
        if table.cls is schema.STRING_DEF:
            continue
        for f in table.cls.fields:
            if f.type != "sid" or not len(table):
                continue
            column = table[f.name]
            stamps = table["timestamp"]
            order = np.lexsort((stamps, column))
            used, first = np.unique(column[order], return_index=True)
            for sid, ts in zip(used.tolist(), stamps[order][first].tolist()):
                assert sid in def_ts, f"{name}.{f.name}: sid {sid} is never defined"
                assert def_ts[sid] <= ts, f"{name}.{f.name}: sid {sid} used at {ts} before its definition at {def_ts[sid]}"


# ---------------------------------------------------------------- dataflow views
def node_names(trace: Any) -> dict[int, str]:
    begins = trace.table("node_begin")
    return dict(zip(begins["node_id"].tolist(), begins.text("name").tolist()))


def edges_by_name(trace: Any) -> list[tuple[str, str]]:
    names = node_names(trace)
    edges = trace.table("tensor_edge")
    return sorted((names[p], names[c]) for p, c in zip(edges["producer"].tolist(), edges["consumer"].tolist()))


def rows(table: Any, *columns: str) -> list[tuple[Any, ...]]:
    return list(zip(*(table[c].tolist() for c in columns)))


def write_script(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]




def record_nodes(count: int, name: str = "node", op: str = "op", device: str = "cpu") -> Callable[[Any], None]:
    """A make_trace body recording `count` empty nodes."""

    def body(session: Any) -> None:
        for _ in range(count):
            with tracer.node(name, op=op, device=device):
                pass

    return body


def run_in_threads(count: int, target: Callable[[int], Any], names: list[str] | None = None) -> None:
    """Run target(i) in `count` threads that start together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # pragma: no cover - only on failure
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), name=names[i] if names else f"worker-{i}") for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]



assert PACKET_PREAMBLE_SIZE == 64


def fork_join_cpu_trace(path: Path, spans: tuple[tuple[int, int], ...] = ((100, 200), (200, 300), (300, 400)),
                        env: dict[str, str | int] | None = None) -> Path:
    """Two independent CPU nodes and a third that joins them (its inputs: both), with no shapes
    and no GPU; `spans` are the three (begin, end) times, `env` the trace metadata."""
    from tracer.builder import TraceBuilder

    with TraceBuilder(path, clock_offset_ns=0, overwrite=True, env=env) as b:
        cpu = b.device("cpu", 10)
        for nid, (start, end) in enumerate(spans):
            b.add("node_begin", "1", start, nid, "op", f"n{nid}", cpu, 1, 0)
            b.add("node_end", "1", end, nid, cpu, 1)
        join = spans[2][0]
        b.add("tensor_edge", "1", join, 0, 2, 1, 64, cpu, cpu)
        b.add("tensor_edge", "1", join, 1, 2, 2, 64, cpu, cpu)
    return path


def lossy_trace(make_trace: Callable[..., Path]) -> Path:
    """A recorded trace whose streams report discarded events: 3 nodes flushed as a periodic flush
    would, then 500 more with no room to queue packets (make_trace's max_pending=0)."""

    def body(s: Any) -> None:
        for _ in range(3):
            with tracer.node("n"):
                pass
        with s._drain_lock:
            s._collect_partials(due=0.0)
            s._drain(float("inf"))
        for _ in range(500):
            with tracer.node("n"):
                pass

    return make_trace(body, packet_size=1024, max_pending=0)


def transformer_training_step(torch: Any, sparse: bool = True) -> Callable[[], None]:
    """A deterministic training step that exercises the edge rules: a transformer with backward and
    Adam, an embedding (with `sparse`, its gradient sparse and a dense tensor made sparse and
    multiplied), and indexing with a tensor. Run once before it is returned (lazy set-up stays out)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    embedding = torch.nn.Embedding(50, 32, sparse=sparse)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, index = torch.randn(4, 8, 32), torch.randint(0, 50, (4, 8))

    def step() -> None:
        optimizer.zero_grad()
        y = model(x + embedding(index))
        y[:, torch.tensor([0, 2])].sum().backward()
        optimizer.step()
        if sparse:
            (torch.randn(4, 4).to_sparse() @ torch.randn(4, 2)).sum()

    step()
    return step
