"""The committed test traces are what tests/data/make_traces.py writes, byte for byte.

A failure means the writer's output changed: if that is intended, regenerate them with
`.venv/bin/python tests/data/make_traces.py` and commit the new files.
"""

from pathlib import Path

import pytest

from tc_analyses.reader import read_trace
from tests.data import make_traces

COMMITTED = Path(make_traces.__file__).resolve().parent / "traces" / "succeed"


@pytest.mark.parametrize("name", sorted(make_traces.TRACES))
def test_regenerated_trace_is_byte_identical(name: str, tmp_path: Path) -> None:
    make_traces.TRACES[name](tmp_path / name)
    fresh = {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()}
    committed = {p.name: p.read_bytes() for p in (COMMITTED / name).iterdir()}
    assert sorted(fresh) == sorted(committed)
    changed = [f for f in fresh if fresh[f] != committed[f]]
    assert not changed, f"{name}: {changed} differ; rerun tests/data/make_traces.py if intended"


def test_all_classes_trace_holds_every_class_and_its_dataflow() -> None:
    from tracer import schema

    trace = read_trace(COMMITTED / "all-classes")
    assert set(trace.tables) == {c.name for c in schema.CATALOGUE}
    edges = trace.table("tensor_edge")
    assert list(zip(edges["producer"].tolist(), edges["consumer"].tolist())) == [(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8)]
    kernels = trace.table("kernel_begin")
    assert kernels.text("name").tolist() == ["relu_kernel<float>"] * 3
    threads = trace.table("thread_info")
    assert threads.text("name").tolist() == ["MainThread", "loader <&\"'> ☃"]


def test_every_string_is_defined_before_its_first_use() -> None:
    from tracer import schema

    trace = read_trace(COMMITTED / "all-classes")
    defs = trace.table("string_def")
    defined_at = dict(zip(defs["sid"].tolist(), defs["timestamp"].tolist()))
    for cls in schema.CATALOGUE:
        table = trace.table(cls.name)
        for field in cls.fields:
            if field.type == "sid" and len(table):
                for ts, sid in zip(table["timestamp"].tolist(), table[field.name].tolist()):
                    assert defined_at[sid] < ts, f"{cls.name}.{field.name}: sid {sid} used at {ts}"
