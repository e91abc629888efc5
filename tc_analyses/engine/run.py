"""Build the state systems (and latency segments) of XML analyses over a trace, headless.

Events: every event of the trace in timestamp order (:mod:`tc_analyses.engine.events`).
Analyses: any XML files; the CLI passes the generated ones (``dfcompass build-analyses`` for the
trace) when the user names none. Returns a :class:`BuiltAnalyses` that the summary and the
``states`` command read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, TypeVar

from tc_analyses.engine.columnar import NotColumnar, run_columnar
from tc_analyses.engine.events import LOST_EVENT, EventClassRows, EventOrder, iter_ctf_events, rows_of
from tc_analyses.engine.state_system import StateSystem
from tc_analyses.engine.columnar_pattern import run_columnar_pattern_deferred
from tc_analyses.engine.xml_pattern import Pattern, Segment, load_patterns
from tc_analyses.engine.xml_provider import Event, load_providers
from tc_analyses.errors import DfcompassError
from tc_analyses.reader.fast import DfcTrace, read_trace
from tc_analyses.reader.metadata import is_dfcompass_trace


T = TypeVar("T")


class Systems(MutableMapping[str, StateSystem]):
    """Analysis id -> state system, in the order they were added. A system may be added as a function
    that builds it (:meth:`defer`): it is built the first time it is read, and kept."""

    def __init__(self, systems: Mapping[str, StateSystem] | None = None) -> None:
        self._items: dict[str, StateSystem | _Deferred] = dict(systems or {})

    def defer(self, key: str, build: Callable[[], StateSystem]) -> None:
        self._items[key] = _Deferred(build)

    def __getitem__(self, key: str) -> StateSystem:
        item = self._items[key]
        if isinstance(item, _Deferred):
            item = self._items[key] = item.build()  # the same key: the order stays
        return item

    def __setitem__(self, key: str, system: StateSystem) -> None:
        self._items[key] = system

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getstate__(self) -> dict[str, StateSystem]:  # sent to another process: built first
        return {key: self[key] for key in self}

    def __setstate__(self, state: dict[str, StateSystem]) -> None:
        self._items = dict(state)


@dataclass(frozen=True)
class _Deferred:
    build: Callable[[], StateSystem]


@dataclass
class BuiltAnalyses:
    path: str
    first_ts: int | None = None  # first and last event timestamps, ns from the clock's origin (Trace Compass's)
    last_ts: int | None = None
    events: int = 0
    lost: int = 0  # events the tracer reported lost
    classes: tuple[str, ...] = ()  # event names seen
    systems: Systems = field(default_factory=Systems)  # analysis id -> state system
    segments: dict[str, Sequence[Segment]] = field(default_factory=dict)  # pattern id -> segments
    engines: dict[str, str] = field(default_factory=dict)  # analysis id -> how it ran: "columns" or "events"

    @property
    def span_ns(self) -> int:
        return 0 if self.first_ts is None or self.last_ts is None else self.last_ts - self.first_ts + 1


class _Source:
    """The trace's events, replayed once per analysis: all of them or only the classes it handles."""

    def __init__(self, order: EventOrder | None, events: Sequence[Event] | None) -> None:
        self.order, self._events = order, events
        self._rows: list[EventClassRows] | None = None

    def classes(self) -> list[EventClassRows]:
        """The events as columns, one entry per event class, for the columnar engine."""
        if self.order is not None:
            return self.order.classes
        if self._rows is None:
            self._rows = rows_of(list(self._events or []))
        return self._rows

    def events(self, names: set[str] | None = None, follow: bool = False) -> Iterator[Event]:
        if self.order is not None:
            return self.order.iter_events(names, follow)
        events = self._events or []
        if names is None:
            return iter(events)
        return (e for i, e in enumerate(events) if e[0] in names or (follow and (
            i == 0 or events[i - 1][0] in names)))


def _event_source(trace: str | Path | DfcTrace, built: BuiltAnalyses) -> _Source:
    if isinstance(trace, DfcTrace):
        return _dfc_source(trace, built)
    if is_dfcompass_trace(trace):
        return _dfc_source(read_trace(trace), built)
    # Times from the clock's origin (its offset applied), as Trace Compass shows them; a folder of
    # several traces (a job, an LTTng session) shares one time line that way, as an experiment.
    events = list(iter_ctf_events(trace, from_origin=True))  # babeltrace2 is slow: read once, replay per analysis
    built.events = sum(1 for e in events if e[0] != LOST_EVENT)
    built.lost = sum(int(e[2].get("Lost events") or 0) for e in events if e[0] == LOST_EVENT)
    built.classes = tuple(sorted({e[0] for e in events}))
    if events:
        built.first_ts, built.last_ts = events[0][1], events[-1][1]
    return _Source(None, events)


def _dfc_source(trace: DfcTrace, built: BuiltAnalyses) -> _Source:
    built.lost = trace.discarded
    built.classes = tuple(sorted(name for name, table in trace.tables.items() if len(table)))
    built.events = sum(len(t) for t in trace.tables.values())
    order = EventOrder(trace)
    built.first_ts, built.last_ts = order.first_ts, order.last_ts  # Trace Compass's time base
    return _Source(order, None)


ENGINES = ("auto", "interpreter", "events")


SPILL_BYTES = 64 << 20  # a state system whose intervals take more goes to a mapped file (StateSystem.spill)
_INTERVAL_BYTES = 20  # a start, an end and a value id


def build(trace: str | Path | DfcTrace, xml_files: list[Path],
          progress: Callable[[int], None] | None = None, engine: str = "auto",
          spill_bytes: int | None = SPILL_BYTES, spill_dir: str | Path | None = None) -> BuiltAnalyses:
    """Run every state provider and pattern of `xml_files` on the trace.

    `engine`: "auto" runs providers and patterns on columns where they allow it (engine/columnar.py,
    engine/columnar_pattern.py) and the rest event by event, each analysis over only the events it handles; "interpreter"
    runs every analysis event by event, over the events it handles; "events" is the plain
    event-by-event run over every event, the reference the others are tested against.

    `trace`: a path to any CTF trace (dfcompass traces through the fast reader, others through
    babeltrace2), or a dfcompass trace already read, so a caller that has one does not read it twice.

    Each state system whose intervals pass `spill_bytes` (None: never) moves them to a memory-mapped
    file in `spill_dir` as soon as it is built, so the ones built before do not add to the peak of
    the next.
    """
    built = BuiltAnalyses(str(trace.path if isinstance(trace, DfcTrace) else trace))
    events = _event_source(trace, built)
    with _malformed("", xml_files):
        providers = [(f, p) for f in xml_files for p in _loaded(load_providers, f)]
        patterns = [(f, p) for f in xml_files for p in _loaded(load_patterns, f)]
    if built.first_ts is None:
        raise DfcompassError(f"{built.path}: the trace is empty: no events were recorded (a program killed "
                             "before its first event, or one that traced nothing)")
    if not providers and not patterns:
        raise DfcompassError(f"{', '.join(map(str, xml_files)) or 'the analyses'}: no stateProvider or pattern to run")
    span = (built.first_ts, built.last_ts or built.first_ts)
    names = set(built.classes) | {LOST_EVENT}
    events.classes()  # made once, before another thread may ask for them

    def run_patterns() -> tuple[list[tuple[Path, Pattern, Any]], dict[str, str]]:
        engines: dict[str, str] = {}
        done = []
        for path, pattern in patterns:
            with _malformed(pattern.id, [path]):
                done.append((path, pattern, _run(pattern, events, names, engine, progress, span, engines)))
        return done, engines

    # The patterns run beside the providers when there is a core for them: each analysis reads the
    # trace's columns and writes only its own state, and most of the time goes to numpy calls that
    # let go of the GIL. The results are taken in the serial order, so the output, the engines'
    # order and the first error are those of a serial run.
    if engine == "auto" and providers and patterns and (os.cpu_count() or 1) > 1 and _room_for_both(built.events):
        later = _Beside(run_patterns)
        try:
            _run_providers(providers, events, names, engine, progress, span, built, spill_bytes, spill_dir)
        except Exception:
            later.wait()  # a provider's error, as a serial run raises it, once the patterns are done
            raise
        ran, engines = later.result()
    else:
        _run_providers(providers, events, names, engine, progress, span, built, spill_bytes, spill_dir)
        ran, engines = run_patterns()
    built.engines.update(engines)
    for path, pattern, (segments, system) in ran:
        built.segments[pattern.id] = segments
        if isinstance(system, StateSystem):
            built.systems[pattern.id] = system
            _spill_if_large(system, spill_bytes, spill_dir)
        else:  # built when first read (analyze reads the segments only)
            built.systems.defer(pattern.id, _later(pattern.id, [path], system, spill_bytes, spill_dir))
    _check_matches(built, xml_files)
    return built


# Peak memory per event of a build one analysis after the other (500 B measured on 1M and 10M
# events); running the two groups at once adds up to a quarter more.
_BUILD_BYTES_PER_EVENT = 600


def _room_for_both(events: int) -> bool:
    """Whether the free memory holds twice what a serial build peaks at: where it does not, the
    analyses run one after the other, as the larger peak could push the machine into swap."""
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not Linux or not known: stay serial
        return False
    return free >= 2 * events * _BUILD_BYTES_PER_EVENT


class _Beside(Generic[T]):
    """A function run on a daemon thread (an interrupted command does not wait for it to finish)."""

    def __init__(self, function: Callable[[], T]) -> None:
        self._function = function
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="dfcompass-patterns", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self._value = self._function()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


def _run_providers(providers: list[tuple[Path, Any]], events: "_Source", names: set[str], engine: str,
                   progress: Callable[[int], None] | None, span: tuple[int, int], built: BuiltAnalyses,
                   spill_bytes: int | None, spill_dir: str | Path | None) -> None:
    for path, provider in providers:
        with _malformed(provider.id, [path]):
            built.systems[provider.id] = _run(provider, events, names, engine, progress, span, built.engines)
        _spill_if_large(built.systems[provider.id], spill_bytes, spill_dir)


def _later(analysis: str, paths: list[Path], build: Callable[[], StateSystem], limit: int | None,
           folder: str | Path | None) -> Callable[[], StateSystem]:
    def built() -> StateSystem:
        with _malformed(analysis, paths):
            system = build()
        _spill_if_large(system, limit, folder)
        return system

    return built


def _spill_if_large(system: StateSystem, limit: int | None, folder: str | Path | None) -> None:
    if limit is not None and system.interval_count() * _INTERVAL_BYTES > limit:
        try:
            system.spill(folder)
        except OSError:  # no room or no temporary folder: the intervals stay in memory, as they were
            pass


def _run(analysis: Any, source: _Source, names: set[str], engine: str, progress: Callable[[int], None] | None,
         span: tuple[int, int], engines: dict[str, str]) -> Any:
    """One provider (its state system) or pattern (its segments and state system): on columns
    when `engine` allows it and the analysis does, else event by event."""
    pattern = isinstance(analysis, Pattern)
    handled = analysis.handled(names)
    if engine == "auto":
        try:
            result = (run_columnar_pattern_deferred if pattern else run_columnar)(analysis, source.classes(), span)
            engines[analysis.id] = "columns"
            _advance(progress, source, handled)
            return result
        except NotColumnar:
            pass
    engines[analysis.id] = "events"
    events = source.events(None if engine == "events" else handled, follow=pattern)
    return analysis.run(_counted(events, progress), span)


def _advance(progress: Callable[[int], None] | None, source: _Source, names: set[str] | None) -> None:
    """A run on columns counts the events of the classes it took, as the event-by-event run counts."""
    if progress is not None:
        progress(sum(len(rows) for rows in source.classes() if names is None or rows.name in names))


def _loaded(load: Callable[[Path], list[Any]], path: Path) -> list[Any]:
    with _malformed("", [path]):
        return load(path)


@contextmanager
def _malformed(analysis: str, paths: Sequence[Path]) -> Iterator[None]:
    """An XML analysis the schema would reject (a missing attribute, an element out of place) fails
    inside the engine with a Python error; say so in one line naming the file, not as an internal error."""
    try:
        yield
    except DfcompassError as exc:
        if paths and not any(str(p) in str(exc) for p in paths) and not str(exc).startswith(("/", ".")):
            name = f" ({analysis})" if analysis else ""
            raise DfcompassError(f"{', '.join(map(str, paths))}{name}: {exc}") from None  # name the file
        raise
    except (TypeError, AttributeError, IndexError, KeyError, ValueError) as exc:
        where = ", ".join(map(str, paths)) or "the analyses"
        name = f" ({analysis})" if analysis else ""
        raise DfcompassError(f"{where}{name}: a malformed analysis: {type(exc).__name__}: {exc}; "
                             "check the file with --xsd (Trace Compass's schema)") from None


def _counted(events: Iterator[Event], progress: Callable[[int], None] | None) -> Iterator[Event]:
    if progress is None:
        yield from events
        return
    for n, event in enumerate(events, 1):
        if n % 10_000 == 0:
            progress(10_000)
        yield event


def _check_matches(built: BuiltAnalyses, xml_files: Sequence[Path]) -> None:
    """A trace that does not match the analyses gives a clear message, not empty output. An analysis
    that handled events made attributes, even if every value it gave them was null: Trace Compass
    shows those (empty rows), and so do we."""
    if any(built.segments.values()):
        return  # before the state systems: a pattern's is built only when read
    if not any(any(True for _ in ss.paths()) for ss in built.systems.values()):
        shown = ", ".join(built.classes[:12]) + (" ..." if len(built.classes) > 12 else "")
        files = ", ".join(map(str, xml_files))
        raise DfcompassError(f"{built.path}: none of the analyses{f' of {files}' if files else ''} found events they "
                             f"handle in this trace (its events: {shown or 'none'})")
