"""tracer.native reads each op's inside in C++: the trace it gives equals the Python walk's.

The same profile windows (a training step with backward and Adam, a sparse embedding, indexing
with a tensor, a dense tensor made sparse and multiplied) are converted twice, once per walk,
into two traces, which must hold the same events field for field (the timestamps differ only by
each session's clock offset).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader.fast import read_trace  # noqa: E402
from tracer import native, schema  # noqa: E402
from tracer.batch import Batch  # noqa: E402
from tracer.session import Session  # noqa: E402
from tracer.torch_convert import _WindowWriter  # noqa: E402
from tracer.torch_events import _Collector  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402
from tests.helpers import transformer_training_step  # noqa: E402


def _windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The profiler results of four recorded steps, kept instead of converted."""
    kept: list[Any] = []
    monkeypatch.setenv("DFCOMPASS_HANDOFF", "0")  # the windows are kept in this process
    monkeypatch.setattr(TorchRecorder, "_convert_window", lambda self, prof: kept.append(prof.profiler.kineto_results))
    step = transformer_training_step(torch)
    with TorchRecorder(str(tmp_path / "recorded"), engine="profiler") as recorder:
        for _ in range(4):
            step()
            recorder.step()
    return kept


def _convert(windows: list[Any], out: Path, walk: Any) -> None:
    session = Session(str(out)).start()
    writer, os_tids, seq_scope = _WindowWriter(torch), {}, {}  # type: ignore[var-annotated]
    try:
        for index, results in enumerate(windows):
            collector = _Collector(torch, os_tids, seq_scope, step_marks=True, native=walk)
            for root in results.experimental_event_tree():
                collector.walk(root, "", schema.NO_STEP, "")
            collector.steps_by_time()
            assert session.trace is not None
            batch = Batch(session, session.trace.origin_ts, session.clock.offset_to_wall_ns())
            writer.write_nodes(batch, collector, index)
            writer.write_memory(batch, collector)
            batch.flush()
    finally:
        session.stop()


def test_the_native_walk_gives_the_python_walks_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walk = native.profile_walk(torch)
    if walk is None:
        pytest.skip(f"tracer.native is not built in {native.native_dir()} for this torch "
                    "(python -m tracer.native build; make setup does it)")
    windows = _windows(tmp_path, monkeypatch)
    _convert(windows, tmp_path / "python", None)
    _convert(windows, tmp_path / "native", walk)
    python, built = read_trace(tmp_path / "python"), read_trace(tmp_path / "native")
    assert sorted(python.tables) == sorted(built.tables)
    for name, table in python.tables.items():
        assert len(table) == len(built.tables[name]), name
        for column in table.columns:
            if column != "timestamp":
                assert np.array_equal(table[column], built.tables[name][column]), (name, column)
    # What the comparison covers: edges (backward and in-place ones too), frees, a sparse tensor.
    assert len(python.table("tensor_edge")) > 500 and len(python.table("mem_free")) > 500
    ops = set(python.table("node_begin").text("op").tolist())
    assert {"aten::to_sparse", "aten::embedding_backward", "aten::index"} <= ops


def test_dfcompass_native_0_asks_for_the_python_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFCOMPASS_NATIVE", "0")
    assert native.profile_walk(torch) is None


def test_a_stamp_of_another_torch_is_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFCOMPASS_NATIVE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_loaded", {})
    (tmp_path / "stamp").write_text("torch 0.0.1; source 0:0\n")
    (tmp_path / "dfcompass_profile_walk.so").write_bytes(b"not a library")
    assert native.profile_walk(torch) is None
