"""`dfcompass repair`: cut damaged streams back to their last whole packet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.repair import repair_trace
from tests.helpers import packets_of, record_nodes
from tests.test_reader.damage import CASES, NODES, PACKET_SIZE, stream


@pytest.fixture
def good_trace(make_trace: Any) -> Path:
    return make_trace(record_nodes(NODES), name="trace", packet_size=PACKET_SIZE)


def _snapshot(trace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in trace.iterdir()}


def _events(cli: Callable[..., Any], trace: Path) -> dict[str, Any]:
    result = cli("info", "--format", "json", trace)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_repair_cuts_a_truncated_packet(good_trace: Path, cli: Callable[..., Any]) -> None:
    before = _events(cli, good_trace)
    begin_file = stream(good_trace, "node_begin")
    packets = packets_of(begin_file)
    lost = packets[-1].body_len // 32
    assert lost == NODES % 30 == 10
    expected = CASES["truncated_mid_packet"](good_trace)
    damaged_size = begin_file.stat().st_size
    assert cli("info", good_trace).exit_code == 1

    result = cli("repair", good_trace)
    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert line.startswith(f"{begin_file}: cut {damaged_size - expected.offset} bytes at byte {expected.offset} (")
    assert "truncated packet" in line
    assert begin_file.stat().st_size == expected.offset

    after = _events(cli, good_trace)
    assert after["events"] == before["events"] - lost
    assert after["events_per_class"]["dfc:node_begin"] == NODES - lost
    assert after["events_per_class"]["dfc:node_end"] == NODES
    assert read_trace(good_trace).table("node_begin")["node_id"].tolist() == list(range(NODES - lost))
    again = cli("repair", good_trace)
    assert again.exit_code == 0 and "nothing to repair" in again.stdout


def test_dry_run_changes_nothing(good_trace: Path, cli: Callable[..., Any]) -> None:
    expected = CASES["truncated_mid_packet"](good_trace)
    damaged = _snapshot(good_trace)
    result = cli("repair", "--dry-run", good_trace)
    assert result.exit_code == 0
    assert f"{expected.file}: would cut" in result.stdout and f"at byte {expected.offset}" in result.stdout
    assert _snapshot(good_trace) == damaged
    assert cli("info", good_trace).exit_code == 1


def test_healthy_trace_is_left_alone(good_trace: Path, cli: Callable[..., Any]) -> None:
    before = _snapshot(good_trace)
    result = cli("repair", good_trace)
    assert result.exit_code == 0
    assert result.stdout == f"{good_trace}: every packet is whole; nothing to repair\n"
    assert _snapshot(good_trace) == before


def test_repair_keeps_the_packets_before_a_bad_one(good_trace: Path) -> None:
    CASES["bad_magic"](good_trace)  # second of four node_begin packets
    CASES["packet_size_not_whole_bytes"](good_trace)  # first node_end packet
    repairs = repair_trace(good_trace)
    assert sorted((Path(r.path).name.partition("-")[0], r.kept_bytes) for r in repairs) == [
        ("node_begin", 64 + 30 * 32), ("node_end", 0)]
    trace = read_trace(good_trace)
    assert len(trace.table("node_begin")) == 30
    assert len(trace.table("node_end")) == 0


def test_repair_refuses_what_it_cannot_handle(good_trace: Path, cli: Callable[..., Any]) -> None:
    meta = good_trace / "metadata"
    meta.write_text(meta.read_text().replace('tracer_name = "dfcompass";', 'tracer_name = "lttng-ust";'))
    result = cli("repair", good_trace)
    assert result.exit_code == 1
    assert result.stderr.startswith("dfcompass: error: ") and "dfcompass trace" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    meta.unlink()
    result = cli("repair", good_trace)
    assert result.exit_code == 1 and "missing metadata" in result.stderr


def test_repair_cuts_a_packet_with_a_foreign_uuid_at_its_start(good_trace: Path, cli: Callable[..., Any]) -> None:
    begin_file = stream(good_trace, "node_begin")
    last = packets_of(begin_file)[-1]
    CASES["uuid_mismatch"](good_trace)
    assert cli("repair", good_trace).exit_code == 0
    assert begin_file.stat().st_size == last.offset
    assert _events(cli, good_trace)["events_per_class"]["dfc:node_begin"] == NODES - 10
