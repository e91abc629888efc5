"""The engine sees a dfcompass trace's events in the order and time base Trace Compass does.

Trace Compass reads events of equal timestamps in stream-file-name order and adds the CTF clock
offset; babeltrace2 agrees with it (issue 16). So the engine's stream (tc_analyses.engine.events)
must equal babeltrace2's, event for event: names and ns from the clock's origin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_analyses.engine.events import LOST_EVENT, iter_events
from tc_analyses.reader import read_trace
from tests.helpers import requires_bt2

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


def _bt2_order(path: Path) -> list[tuple[str, int]]:
    from tc_analyses.reader.bt2_source import Event, iter_trace

    return [(e.name, e.ns_from_origin) for e in iter_trace(path, with_fields=False) if isinstance(e, Event)]


def _engine_order(path: Path) -> list[tuple[str, int]]:
    return [(name, ts) for name, ts, _ in iter_events(read_trace(path)) if name != LOST_EVENT]


@requires_bt2
@pytest.mark.parametrize("trace", [DATA / "succeed" / "all-classes", *sorted((DATA / "jobs" / "ddp-2rank").iterdir())],
                         ids=lambda p: p.name)
def test_engine_order_is_babeltrace2_order(trace: Path) -> None:
    ours = _engine_order(trace)
    assert ours and ours == _bt2_order(trace)
    # In the larger traces the order matters: equal timestamps of different classes occur.
    stamps = [ts for _, ts in ours]
    assert len(stamps) < 100 or len(set(stamps)) < len(stamps)


@requires_bt2
@pytest.mark.slow
def test_imported_kineto_traces_in_babeltrace2_order(shared_dir: Path, tmp_path: Path) -> None:
    from tracer.importers import import_kineto

    for file in sorted((shared_dir / "traces" / "kineto").glob("*/*.json.gz")):
        out = tmp_path / file.name
        import_kineto(file, out)
        ours = _engine_order(out)
        assert ours == _bt2_order(out), file.name
        # Kineto's dfc:thread_info shares its time with the thread's first event: the file order
        # puts the event first, as Trace Compass shows it.
        assert len(set(ts for _, ts in ours)) < len(ours)
