"""Real LTTng traces from ../shared/traces/lttng (skipped when that folder is absent).

Expected numbers come from ../shared/traces/README.md (counted with babeltrace2 2.0.4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_analyses.analyses import trace_info
from tests.helpers import requires_bt2

pytestmark = [pytest.mark.shared, requires_bt2]

TRACES = [
    pytest.param("many-threads", 240_644, 8, marks=pytest.mark.slow, id="many-threads-slow"),
    pytest.param("ros2", 99_338, 8, marks=pytest.mark.slow, id="ros2"),
    pytest.param("context-switches-ust", 3_934, 1, id="context-switches-ust"),
    pytest.param("ust-tracef-local", 5_602, 2, id="ust-tracef-local"),
]


@pytest.fixture(scope="module")
def lttng(shared_dir: Path) -> Path:
    return shared_dir / "traces" / "lttng"


_INFOS: dict[Path, trace_info.TraceInfo] = {}


def _info(path: Path) -> trace_info.TraceInfo:
    """trace_info.run, once per trace for the whole module (ros2 takes a second or two)."""
    if path not in _INFOS:
        _INFOS[path] = trace_info.run(path)
    return _INFOS[path]


@pytest.mark.parametrize("name,events,streams", TRACES)
def test_trace_info_totals(lttng: Path, name: str, events: int, streams: int) -> None:
    info = _info(lttng / name)
    assert info.reader == "ctf"  # our CTF 1.8 reader takes every LTTng trace here
    assert info.producer != "dfcompass"
    assert info.events == events
    assert sum(info.events_per_class.values()) == events
    assert info.discarded == 0
    assert len(info.streams) == streams
    assert sum(s.events for s in info.streams) == events
    assert info.first_ns is not None and info.last_ns is not None and info.first_ns < info.last_ns


def test_ust_tracef_local_classes(lttng: Path) -> None:
    info = _info(lttng / "ust-tracef-local")
    assert info.events_per_class == {"lttng_ust_tracef:event": 5602}
    assert sorted(s.name for s in info.streams) == ["channel0_0", "channel0_1"]
    assert info.env.get("domain") == "ust"
    assert 33_000_000 < info.duration_ns < 34_000_000  # 0.03336 s


@pytest.mark.slow
def test_ros2_main_counts(lttng: Path) -> None:
    per_class = _info(lttng / "ros2").events_per_class
    assert len(per_class) == 30
    assert per_class["ros2:rclcpp_executor_get_next_ready"] == 24_189
    assert per_class["ros2:callback_start"] == per_class["ros2:callback_end"] == 6_065
    assert per_class["dds:write"] == 6_153


@pytest.mark.parametrize("name,events", [("context-switches-ust", 3_934), ("ust-tracef-local", 5_602)])
def test_bt2_source_counts(lttng: Path, name: str, events: int) -> None:
    from tc_analyses.reader import bt2_source

    items = list(bt2_source.iter_trace(lttng / name, with_fields=False))
    assert all(isinstance(i, bt2_source.Event) for i in items)
    assert len(items) == events
    stamps = [i.ns_from_origin for i in items]
    assert stamps == sorted(stamps)


def test_tracef_payloads(lttng: Path) -> None:
    from tc_analyses.reader import bt2_source

    messages = [e.fields["msg"] for e in bt2_source.iter_trace(lttng / "ust-tracef-local")]
    assert messages[0].startswith("app_start") and messages[-1].startswith("app_end")
    assert sum(m.startswith("op_begin") for m in messages) == 2_400
    assert sum(m.startswith("step_end") for m in messages) == 400


def test_folder_of_traces_reads_as_one(lttng: Path, tmp_path: Path) -> None:
    import shutil

    for name in ("ust-tracef-local", "context-switches-ust"):
        shutil.copytree(lttng / name, tmp_path / "session" / name)
    info = trace_info.run(tmp_path / "session")
    assert info.events == 5_602 + 3_934
    assert info.events_per_class["lttng_ust_tracef:event"] == 5_602 + 41
    assert len(info.streams) == 3
