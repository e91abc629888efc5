"""General CTF reader on babeltrace2's Python bindings: any CTF trace, LTTng kernel and UST included.

This is the only module that imports ``bt2``, lazily: bt2 is not on PyPI (Debian ships it as
python3-bt2), so a missing install is reported as one clear error. bt2 objects never leave
this module: messages become frozen :class:`Event` and :class:`Discarded` records here.
"""

from __future__ import annotations

import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Mapping

from tc_analyses.errors import MissingDependencyError, TraceError
from tc_analyses.reader.records import Discarded, Event

__all__ = ["Discarded", "Event", "bt2_module", "iter_trace"]

_bt2: ModuleType | None = None


def bt2_module() -> ModuleType:
    """Import bt2 once, or raise MissingDependencyError saying how to get it."""
    global _bt2
    if _bt2 is None:
        try:
            import bt2
        except ImportError as exc:
            raise MissingDependencyError(
                f"the babeltrace2 Python bindings (bt2) cannot be imported ({exc}); install the Debian "
                "package python3-bt2 and run 'make setup', which links it into .venv"
            ) from None
        _bt2 = bt2
    return _bt2


def _value(field: Any) -> Any:
    """A bt2 field as a plain Python value."""
    bt2 = bt2_module()
    if isinstance(field, bt2._StringFieldConst):
        return str(field)
    if isinstance(field, (bt2._EnumerationFieldConst,)):
        return int(field)
    if isinstance(field, bt2._IntegerFieldConst):
        return int(field)
    if isinstance(field, bt2._RealFieldConst):
        return float(field)
    if isinstance(field, bt2._BoolFieldConst):
        return bool(field)
    if isinstance(field, bt2._StructureFieldConst):
        return {key: _value(sub) for key, sub in field.items()}
    if isinstance(field, bt2._ArrayFieldConst):
        return [_value(sub) for sub in field]
    if isinstance(field, bt2._OptionFieldConst):
        return None if field.field is None else _value(field.field)
    if isinstance(field, bt2._VariantFieldConst):
        return _value(field.selected_option)
    return str(field)


def _struct(field: Any) -> dict[str, Any]:
    return {} if field is None else {key: _value(sub) for key, sub in field.items()}


def iter_trace(path: str | os.PathLike[str], *, with_fields: bool = True) -> Iterator[Event | Discarded]:
    """Every event and discarded-events record of a CTF trace (or of the traces under `path`), in time order.

    With ``with_fields=False`` payload and context are left empty, which is several times faster.
    libbabeltrace2 aborts the whole process on some damaged traces (SIGABRT in bt_graph_run_once,
    where the babeltrace2 command, configured otherwise, exits 0): the read runs in a child process,
    whose death or silence is a :class:`TraceError` naming the trace, never the end of dfcompass.
    """
    bt2_module()  # a missing install is said here, in one line
    path = os.fspath(path)
    from tc_analyses.reader.metadata import find_traces, not_a_directory

    if not os.path.isdir(path):
        raise TraceError(path, not_a_directory(Path(path)))
    traces = find_traces(path)
    if not traces:
        raise TraceError(path, "no CTF trace here (no 'metadata' file in it or below it)")
    _refuse_ctf2_before_2_1(traces)
    yield from _read_in_child(path, with_fields)


def _refuse_ctf2_before_2_1(traces: list[Path]) -> None:
    """babeltrace2 reads CTF 2 (JSON metadata) from 2.1 on; 2.0 (Debian 12 ships 2.0.4) would fail
    on it deep in its metadata parser: say so in one line first."""
    version = str(getattr(bt2_module(), "__version__", "0"))
    if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= (2, 1):
        return
    for trace in traces:
        with open(trace / "metadata", "rb") as f:
            if f.read(1) == b"\x1e":
                raise TraceError(trace, f"CTF 2 metadata: babeltrace2 {version} reads CTF 1.8 only (2.1 and later read "
                                        "CTF 2); dfcompass's own reader reads it (--reader ctf)")


SECONDS_PER_MB = 5  # the child may go this long per MB of trace without a batch before it is given up
MIN_SECONDS = 2  # babeltrace2 reads a small trace in well under 0.1 s
START_SECONDS = 5  # and more before its first batch: Python and bt2 start (0.2 s; seconds on a busy machine)
_BATCH = 4096  # events per message from the child
_HEADER = struct.Struct("<Q")


def child_command(path: str, with_fields: bool) -> list[str]:
    """The child that reads `path` with bt2 and writes its records to stdout (:func:`serve`)."""
    # imported, not run as __main__: the records must pickle as tc_analyses.reader.records' classes
    code = "import sys\nfrom tc_analyses.reader.bt2_source import serve\nserve(sys.argv[1], sys.argv[2] == 'fields')"
    return [sys.executable, "-c", code, path, "fields" if with_fields else "names"]


def _read_in_child(path: str, with_fields: bool) -> Iterator[Event | Discarded]:
    size_mb = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6
    budget = max(MIN_SECONDS, SECONDS_PER_MB * size_mb)
    with tempfile.TemporaryFile() as stderr:
        # unbuffered: select() sees what is in the pipe, none of it held back in a reader's buffer
        child = subprocess.Popen(child_command(path, with_fields), stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        assert child.stdout is not None
        try:
            wait = budget + START_SECONDS
            while True:
                kind, payload = _receive(child, wait, path, stderr)
                wait = budget
                if kind == "items":
                    yield from payload
                elif kind == "error":
                    raise TraceError(path, payload)
                elif kind == "missing":
                    raise MissingDependencyError(payload)
                else:
                    return
        finally:
            child.kill()
            child.wait()
            child.stdout.close()


def _receive(child: subprocess.Popen[bytes], budget: float, path: str, stderr: Any) -> tuple[str, Any]:
    """The child's next message; a TraceError when it dies or stays silent past `budget` seconds."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], budget)
    if not ready:
        raise TraceError(path, f"babeltrace2 gave nothing for {budget:.0f} s ({SECONDS_PER_MB} s per MB): "
                               "the trace is damaged or far too large")
    header = _read_exact(child.stdout, _HEADER.size)
    body = _read_exact(child.stdout, _HEADER.unpack(header)[0]) if header is not None else None
    if body is None:
        status = child.wait()
        stderr.seek(0)
        last = (stderr.read().decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        said = f"; it said: {last}" if last else ""
        if status < 0:
            try:
                name = signal.Signals(-status).name
            except ValueError:  # a real-time signal has no name
                name = f"signal {-status}"
            raise TraceError(path, f"babeltrace2 crashed reading it ({name}): the trace is damaged{said}")
        raise TraceError(path, f"the babeltrace2 reader stopped (exit status {status}){said}")
    message: tuple[str, Any] = pickle.loads(body)
    return message


def _read_exact(pipe: Any, size: int) -> bytes | None:
    """`size` bytes of an unbuffered pipe (whose reads may come short), or None at its end before them."""
    parts, left = [], size
    while left:
        chunk = pipe.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def serve(path: str, with_fields: bool) -> None:
    """The child's side: `path`'s records, in batches, as length-prefixed pickles on stdout."""
    out = sys.stdout.buffer

    def send(kind: str, payload: Any) -> None:
        body = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(body)) + body)
        out.flush()

    batch: list[Event | Discarded] = []
    try:
        for item in _read_in_process(path, with_fields):
            batch.append(item)
            if len(batch) == _BATCH:
                send("items", batch)
                batch = []
        send("items", batch)
        send("done", None)
    except TraceError as exc:
        send("error", exc.problem)
    except MissingDependencyError as exc:
        send("missing", str(exc))


def _read_in_process(path: str, with_fields: bool) -> Iterator[Event | Discarded]:
    bt2 = bt2_module()
    from tc_analyses.reader.metadata import find_traces

    try:
        # Explicit src.ctf.fs components: with auto-discovery, babeltrace2 2.0.4's bindings
        # abort the whole process on metadata they cannot parse instead of raising.
        specs = [bt2.ComponentSpec.from_named_plugin_and_component_class("ctf", "fs", {"inputs": [str(t)]})
                 for t in find_traces(path)]
        iterator = bt2.TraceCollectionMessageIterator(specs)
        event_type = bt2._EventMessageConst
        discarded_type = bt2._DiscardedEventsMessageConst
        for msg in iterator:
            kind = type(msg)
            if kind is event_type:
                event = msg.event
                clock = msg.default_clock_snapshot
                cpu = None
                if with_fields:
                    context = _struct(event.common_context_field)
                    context.update(_struct(event.specific_context_field))
                    fields = _struct(event.payload_field)
                    packet_context = event.packet.context_field if event.packet is not None else None
                    if packet_context is not None and "cpu_id" in packet_context:
                        cpu = int(packet_context["cpu_id"])
                else:
                    context, fields = {}, {}
                yield Event(event.name, clock.value, clock.ns_from_origin, event.stream.name or "", fields, context, cpu)
            elif kind is discarded_type:
                timed = msg.stream.cls.discarded_events_have_default_clock_snapshots
                begin = msg.beginning_default_clock_snapshot if timed else None
                end = msg.end_default_clock_snapshot if timed else None
                yield Discarded(msg.stream.name or "", msg.count, begin.ns_from_origin if begin is not None else None,
                                end.ns_from_origin if end is not None else None)
    except bt2._Error as exc:
        raise TraceError(path, _first_cause(exc)) from None
    except RuntimeError as exc:  # bt2 raises plain RuntimeError/ValueError when no source finds a trace
        raise TraceError(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


_NOISE = re.compile(r":\s*(?:[\w-]+=\S*,?\s*)+$")
_QUOTED_PATH = re.compile(r"`(/[^`]+)`")


def _first_cause(exc: Any) -> str:
    """babeltrace2's innermost cause (the specific one) on one line, plus the file it names."""
    try:
        causes = [" ".join(str(c.message).split()) for c in exc]
    except TypeError:
        causes = []
    if not causes:
        return "babeltrace2: " + " ".join(str(exc).split())[:300]
    message = _NOISE.sub("", causes[0])
    values = dict(re.findall(r"([\w-]+)=([^,\s]+)", causes[0]))
    detail = {k: v for k, v in values.items() if not k.endswith("addr")}
    if detail:
        message += " (" + ", ".join(f"{k}={v}" for k, v in detail.items()) + ")"
    files = [m.group(1) for c in causes for m in [_QUOTED_PATH.search(c)] if m]
    return f"babeltrace2: {message}" + (f" in {files[0]}" if files else "")
