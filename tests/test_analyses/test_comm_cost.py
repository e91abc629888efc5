"""The transfer cost between a job's processes: bytes on the wire, the fit, its held-out check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.analyses.comm_cost import fit_job_link, wire_bytes
from tc_analyses.analyses.ranks import analyse
from tc_analyses.inputs import JobInputs

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
JOB = DATA / "jobs" / "ddp-2rank"
ALL_CLASSES = DATA / "succeed" / "all-classes"


@pytest.mark.parametrize("kind,payload,ranks,wire", [
    ("all_reduce", 1000, 2, 1000), ("all_reduce", 1000, 4, 1500), ("all_gather", 1000, 4, 750),
    ("reduce_scatter", 1000, 2, 500), ("broadcast", 1000, 4, 1000), ("all_reduce", 1000, 1, 1000),
])
def test_bytes_on_the_wire_follow_the_ring_algorithms(kind: str, payload: int, ranks: int, wire: int) -> None:
    assert wire_bytes(kind, payload, ranks) == wire


def test_a_noise_free_link_is_recovered_and_predicts_held_out_transfers_exactly() -> None:
    latency, per_ns = 50_000, 2.0  # 50 µs, 2 GB/s
    samples = [(seq, size, int(latency + size / per_ns)) for seq, size in enumerate([100, 4_000, 20_000, 1_000_000,
                                                                                      64, 8_192, 300_000, 2_000])]
    fit = fit_job_link(samples, hosts=2)
    assert fit.link is not None and fit.fitted_on == 4 and fit.held_out == 4
    assert fit.link.latency_ns == pytest.approx(latency, abs=1) and fit.link.bytes_per_ns == pytest.approx(per_ns)
    assert fit.error_median == pytest.approx(0, abs=1e-6) and fit.error_high == pytest.approx(0, abs=1e-6)
    assert "2 hosts" in fit.link.source


def test_one_size_gives_no_link() -> None:
    fit = fit_job_link([(0, 100, 5_000), (2, 100, 6_000), (1, 100, 5_500)], hosts=1)
    assert fit.link is None and fit.error_median is None


def test_the_ddp_job_gives_a_link_checked_on_its_odd_collectives() -> None:
    fit = analyse(JobInputs(JOB)).link
    assert fit is not None and fit.link is not None and fit.hosts == 1
    assert fit.fitted_on > 0 and fit.held_out > 0 and fit.error_median is not None  # what it is worth, said


def test_placement_uses_the_measured_link_between_hosts_only(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("recommend-placement", ALL_CLASSES, "--devices", "cpu,cuda:0,hostB:cuda:0", "--links-from", JOB,
                 "-o", tmp_path / "plan")
    assert result.exit_code == 0, result.stderr
    links = json.loads((tmp_path / "plan" / "plan.json").read_text())["links"]
    measured = {pair for pair, how in links.items() if how.startswith("measured")}
    assert measured == {pair for pair in links if "hostB" in pair} and measured
    assert "transfers between hosts use the cost measured in" in result.stdout


def test_links_from_needs_devices_on_two_hosts(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("recommend-placement", ALL_CLASSES, "--devices", "cpu,cuda:0", "--links-from", JOB,
                 "-o", tmp_path / "plan")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "one host" in result.stderr
