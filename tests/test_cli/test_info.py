"""`dfcompass info`: text and JSON summaries, both readers agreeing on our traces."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import tracer
from tests.helpers import lossy_trace, requires_bt2, run_in_threads, subprocess_env
from tracer import schema
from tracer.session import Session

JSON_KEYS = {"events", "events_per_class", "streams", "discarded", "first_ns", "last_ns"}


@pytest.fixture
def rich_trace(make_trace: Any) -> Path:
    """Several threads, several packets per stream, GPU classes, edges, steps."""

    def body(s: Session) -> None:
        gpu = s.device("cuda:0", model="H100")
        for i in range(3):
            s.emit("kernel_begin", gpu, 1, i, s.intern("k"), 1, 1, 1, 32, 1, 1)
            s.emit("kernel_end", gpu, 1, i)
            s.emit("mem_alloc", gpu, 4096 * i, 4096, 4096 * (i + 1))

        def work(k: int) -> None:
            x = None
            for i in range(120):
                with tracer.step(i) if k == 0 else _no_step():
                    with tracer.node(f"n{i % 5}", device="cuda:0" if k % 2 else "cpu",
                                     inputs=[x] if x is not None else []) as n:
                        x = np.zeros(2)
                        n.output(x)

        run_in_threads(4, work)

    return make_trace(body, packet_size=1024)


class _no_step:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_text_summary(rich_trace: Path, cli: Callable[..., Any]) -> None:
    result = cli("info", rich_trace)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert f"trace:      {rich_trace}" in out
    assert "producer:   dfcompass (read with the fast reader)" in out
    assert "discarded:  0 events" in out and "lost" not in out
    lines = out.splitlines()
    node_line = next(line for line in lines if line.strip().startswith("dfc:node_begin"))
    assert node_line.split()[-1] == "480"
    assert "time span:  2023-11-14T22:13:20." in out  # FixedClock-like offset 1.7e18 ns


def test_json_summary(rich_trace: Path, cli: Callable[..., Any]) -> None:
    result = cli("info", "--format", "json", rich_trace)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert JSON_KEYS <= set(data)
    assert data["reader"] == "fast" and data["producer"] == "dfcompass"
    assert data["events"] == sum(data["events_per_class"].values())
    assert data["events_per_class"]["dfc:node_begin"] == 480
    assert data["events_per_class"]["dfc:tensor_edge"] == 4 * 119
    assert data["events_per_class"]["dfc:step_begin"] == 120
    assert data["discarded"] == 0
    assert sum(s["events"] for s in data["streams"]) == data["events"]
    assert all(set(s) == {"name", "events", "discarded"} for s in data["streams"])
    assert len({s["name"] for s in data["streams"]}) == len(data["streams"])
    assert 1_700_000_000_000_000_000 < data["first_ns"] < data["last_ns"]
    assert data["duration_ns"] == data["last_ns"] - data["first_ns"]
    assert set(data["events_per_class"]) <= {c.name for c in schema.CATALOGUE}


@requires_bt2
def test_bt2_and_fast_readers_agree(rich_trace: Path, cli: Callable[..., Any]) -> None:
    fast = json.loads(cli("info", "--format", "json", "--reader", "fast", rich_trace).stdout)
    bt2 = json.loads(cli("info", "--format", "json", "--reader", "bt2", rich_trace).stdout)
    auto = json.loads(cli("info", "--format", "json", rich_trace).stdout)
    assert (fast.pop("reader"), bt2.pop("reader"), auto.pop("reader")) == ("fast", "bt2", "fast")
    assert fast == bt2 == auto


@requires_bt2
def test_bt2_and_fast_readers_agree_on_a_lossy_trace(make_trace: Any, cli: Callable[..., Any]) -> None:
    trace = lossy_trace(make_trace)
    fast = json.loads(cli("info", "--format", "json", "--reader", "fast", trace).stdout)
    bt2 = json.loads(cli("info", "--format", "json", "--reader", "bt2", trace).stdout)
    assert fast["discarded"] > 0
    fast.pop("reader"), bt2.pop("reader")
    assert fast == bt2


def test_info_as_a_subprocess(rich_trace: Path, dfcompass_exe: list[str]) -> None:
    done = subprocess.run([*dfcompass_exe, "info", "--format", "json", str(rich_trace)], capture_output=True,
                          text=True, env=subprocess_env(), timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["events_per_class"]["dfc:node_begin"] == 480


def test_bad_options_exit_2(rich_trace: Path, cli: Callable[..., Any]) -> None:
    for args in (("--format", "xml"), ("--reader", "magic")):
        result = cli("info", *args, rich_trace)
        assert result.exit_code == 2
        assert "Traceback" not in result.stderr
