"""The ranks analysis on a recorded DDP job: collectives joined across ranks, the straggler, wait.

The committed job (tests/data/traces/jobs/ddp-2rank) is two gloo ranks recorded by our tracer
from ``python -m tracer.workloads.ddp --ranks 2 --steps 3 --slow-rank 1 --delay-ms 20``: rank 1
sleeps 20 ms before each backward. The analysis is not told that; it must find rank 1 late by
about that much at every gradient all-reduce.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.analyses import ranks
from tc_analyses.analyses.ranks import join_collectives
from tc_analyses.errors import ConfigurationError
from tc_analyses.inputs import JobInputs, TraceInputs
from tests.helpers import requires_babeltrace2, requires_bt2, run_babeltrace2

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "jobs" / "ddp-2rank"
ALL_CLASSES = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
DELAY_NS = 20_000_000


@pytest.fixture(scope="module")
def result() -> Any:
    return ranks.run(JobInputs(JOB), {})


def test_the_job_has_two_ranks_and_two_helper_processes(result: Any) -> None:
    data = result.data
    assert [p.rank for p in data.processes] == [0, 1, None, None]  # the launcher and mp's resource tracker
    assert all(p.nodes > 100 for p in data.ranks)
    assert all(p.nodes == 0 and p.collectives == 0 for p in data.processes if p.rank is None)


def test_every_collective_joins_with_one_kind(result: Any) -> None:
    data = result.data
    assert data.mismatch == ""
    assert len(data.collectives) == data.ranks[0].collectives == data.ranks[1].collectives
    kinds = [c.kind for c in data.collectives]
    assert kinds.count("all_reduce") == 3  # one gradient bucket per step
    assert kinds[0] == "all_gather" and kinds[-1] == "barrier"
    assert [c.seq for c in data.collectives] == list(range(len(kinds)))


def test_the_slow_rank_is_last_at_every_gradient_all_reduce_by_about_its_delay(result: Any) -> None:
    reduces = [c for c in result.data.collectives if c.kind == "all_reduce"]
    assert {c.last_rank for c in reduces} == {1}
    for c in reduces:  # the 20 ms sleep, plus or minus scheduling noise on the recording machine
        assert 0.75 * DELAY_NS < c.skew_ns < 1.5 * DELAY_NS, c
        assert c.skew_ns == c.late_by_ns  # two ranks: last minus first is last minus the one before
    assert result.findings[0].kind == "straggler" and "rank 1 arrived last" in result.findings[0].text


def test_wait_is_what_rank_0_spent_before_rank_1_arrived(result: Any) -> None:
    data = result.data
    rank0, rank1 = data.ranks
    expected = sum(c.arrivals_ns[c.last_rank] - c.arrivals_ns[0] for c in data.collectives)
    assert rank0.wait_ns == expected
    assert rank0.wait_ns > 3 * 0.75 * DELAY_NS > rank1.wait_ns


def test_join_stops_where_the_ranks_disagree() -> None:
    joined, why = join_collectives({0: [(0, "broadcast", 4, 10), (1, "all_reduce", 8, 20)],
                                    1: [(0, "broadcast", 4, 12), (1, "barrier", 1, 25)]})
    assert [c.seq for c in joined] == [0] and "seq 1" in why and "all_reduce" in why and "barrier" in why


def test_join_of_three_ranks_and_a_short_trace() -> None:
    joined, why = join_collectives({0: [(0, "all_reduce", 8, 100), (1, "all_reduce", 8, 300)],
                                    1: [(0, "all_reduce", 8, 130)],
                                    2: [(0, "all_reduce", 8, 190), (1, "all_reduce", 8, 200)]})
    assert len(joined) == 1
    c = joined[0]
    assert (c.last_rank, c.skew_ns, c.late_by_ns) == (2, 90, 60)
    assert "rank 1: 1" in why and "ends early" in why


def test_ranks_of_one_trace_is_not_available(cli: Callable[..., Any]) -> None:
    result = cli("ranks", ALL_CLASSES)
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1 and "needs a job of two or more" in result.stderr


def test_ranks_command_json_and_plots(cli: Callable[..., Any], tmp_path: Path) -> None:
    result = cli("ranks", JOB, "--format", "json", "-o", tmp_path)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["analysis"] == "ranks"
    assert len(document["result"]["collectives"]) == document["result"]["processes"][0]["collectives"] > 0
    assert (tmp_path / "ranks.png").stat().st_size > 0 and (tmp_path / "ranks.svg").stat().st_size > 0


def test_a_single_trace_command_on_a_job_of_many_reads_rank_0(cli: Callable[..., Any]) -> None:
    result = cli("overhead", JOB)  # (`analyze JOB` analyses every process: tests/test_cluster.py)
    notice, error = result.stderr.splitlines()
    assert str(JOB) in notice and "a job of 4 processes; reading rank 0 (pid 18735), the main process" in notice
    assert "rank 1 (pid 18736), 2 processes with no op (pids 18728, 18734)" in notice
    assert result.exit_code == 1 and "vm-18735: no GPU activity" in error  # rank 0's own answer
    assert TraceInputs(JOB).path == JOB / "vm-18735"
    assert cli("overhead", JOB, "--process", "rank 1").stderr.count("vm-18736") == 1


@requires_babeltrace2
def test_babeltrace2_reads_the_job_as_one_trace() -> None:
    job = JobInputs(JOB)
    total = sum(sum(len(t) for t in inputs.trace.tables.values()) for inputs in job.inputs)
    done = run_babeltrace2(JOB)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == total
    stamps = [line[1:19] for line in lines]
    assert stamps == sorted(stamps)  # one merged, time-ordered stream


@requires_bt2
def test_the_trace_compass_ranks_view_shows_the_same_arrivals_headless(result: Any, tmp_path: Path) -> None:
    """ranks.xml run by the headless engine over the job (babeltrace2 merges it, as Trace Compass
    opens it as an experiment): each rank's row changes to seq k exactly at its arrival at k."""
    from tc_analyses.engine import build, layout
    from tc_analyses.export.tracecompass import write_output

    write_output(tmp_path / "out", None)
    system = build(JOB, [tmp_path / "out" / "xml" / "ranks.xml"]).systems[layout.RANKS_ID]
    for rank in (0, 1):
        changes = [(i.start, i.value.value) for i in dict(system.items())[(layout.RANKS, str(rank))]
                   if i.value is not None]
        assert changes == [(c.arrivals_ns[rank], c.seq) for c in result.data.collectives]
    assert sorted(p for p in dict(system.items()) if len(p) == 2) == [(layout.RANKS, "0"), (layout.RANKS, "1")]


def test_the_critical_path_is_a_chain_to_the_job_end_through_the_slow_rank(result: Any) -> None:
    path = result.data.critical_path
    steps = path.steps
    for before, after in zip(steps, steps[1:]):
        spans = after.op.startswith(("gloo:", "nccl:"))
        assert before.end_ns <= (after.end_ns if spans else after.start_ns) + 1_000
        assert after.via in {"thread", "tensor", "collective", "wait"}
        if before.rank != after.rank:  # only a collective joins two processes: the last arrival binds
            assert after.via == "collective" and before.op.startswith("c10d::") and after.op.startswith("gloo:")
    assert path.crossings >= 1
    assert path.by_rank_ns.get(1, 0) > 0  # the straggler is on the path
    assert min(value for *_, value in path.slack) == 0
    assert any(f.kind == "critical_path" for f in result.findings)


def test_the_straggler_is_who_kept_the_others_waiting_longest_not_who_was_last_most_often() -> None:
    from tc_analyses.analyses.ranks import Collective, JobRanks, RankSummary, findings

    def summary(rank: int, last_at: int) -> RankSummary:
        return RankSummary(rank, "h", rank, "t", 10, 1, 1, None, 7, 0, last_at)

    small = [Collective(i, "broadcast", 4, {0: 10 + i, 1: i}, 0, 10, 10) for i in range(5)]  # rank 0 late by 10 ns
    big = [Collective(5 + i, "all_reduce", 8, {0: 0, 1: 20_000_000}, 1, 20_000_000, 20_000_000) for i in range(2)]
    job = JobRanks("job", [summary(0, 5), summary(1, 2)], small + big, "")
    straggler = next(f for f in findings(job) if f.kind == "straggler")
    assert straggler.text.startswith("rank 1 arrived last at 2 of 7 collectives")


def test_one_runs_ranks_belong_together(result: Any) -> None:
    assert result.data.apart == ()
    assert {p.world_size for p in result.data.ranks} == {2}
    assert not any(f.kind == "not_one_run" for f in result.findings)


def _kineto_rank(path: Path, rank: int, world: int, start_us: int) -> Path:
    """A rank's Kineto file: a step of two ops and an all-reduce, with its distributedInfo."""
    ops = [("aten::mm", 0, 40 + 10 * rank), ("c10d::allreduce_", 60, 20), ("aten::add", 90, 5)]
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 10 + rank, "tid": 10 + rank, "ts": start_us + ts,
               "dur": dur, "args": {"External id": k + 1}} for k, (name, ts, dur) in enumerate(ops)]
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
                                "traceEvents": events}))
    return path


@pytest.mark.parametrize("case", ["one run", "days apart", "two world sizes", "a rank twice"])
def test_ranks_says_when_its_traces_are_not_one_runs(cli: Callable[..., Any], tmp_path: Path, case: str) -> None:
    """Rank files of different runs (8.5 days apart, world sizes 8 and 2, rank 0 twice) are compared
    with a warning that names why, first in the findings, and no straggler from arrival times that
    compare nothing; one run's ranks get no warning (issue 36, item 6)."""
    t0 = 1_700_000_000_000_000
    files = [_kineto_rank(tmp_path / "rank-0.json", 0, 2, t0),
             _kineto_rank(tmp_path / "rank-1.json", 1, 8 if case == "two world sizes" else 2,
                          t0 + (734_400_000_000 if case == "days apart" else 3))]
    if case == "a rank twice":
        files.append(_kineto_rank(tmp_path / "rank-0-again.json", 0, 2, t0 + 7))
    job = tmp_path / "job"
    imported = cli("import-kineto", *files, "-o", job)
    assert imported.exit_code == 0, imported.stderr
    done = cli("ranks", job, "--format", "json")
    assert done.exit_code == 0, done.stderr
    findings = json.loads(done.stdout)["findings"]
    warned = [f["text"] for f in findings if f["kind"] == "not_one_run"]
    expected = {"one run": None, "days apart": "the traces do not overlap in time: rank 1 begins 734400.00 s after rank 0 ends",
                "two world sizes": "the ranks recorded different world sizes (rank 0: 2, rank 1: 8)",
                "a rank twice": "rank 0 is claimed by 2 traces"}[case]
    if expected is None:
        assert warned == []
        return
    assert len(warned) == 1 and expected in warned[0], findings
    assert findings[0]["kind"] == "not_one_run"
    assert (case == "days apart") == (not any(f["kind"] == "straggler" for f in findings))
    text = cli("ranks", job)
    assert f"warning: {warned[0].split(': ', 1)[1]}" in text.stdout
