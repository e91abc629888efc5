"""Seeded damage to a small trace: every command path reads it or fails with one line naming it."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tc_analyses.errors import DfcompassError
from tc_analyses.export import reports
from tc_analyses.inputs import TraceInputs
from tests.fuzz.trace_mutations import mutate_trace
from tests.helpers import REPO_ROOT

SOURCE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"
FIXTURES = sorted((REPO_ROOT / "tests" / "data" / "fuzz" / "traces").iterdir())


def _outcome(trace: Path) -> str:
    """Read, pair, build the graph and run the generated analyses, as `info` and `analyze` do."""
    try:
        inputs = TraceInputs(trace)
        reports.info_text(inputs.info)
        inputs.activity
        inputs.graph
        inputs.summary()
    except DfcompassError as exc:
        message = str(exc)
        assert str(trace) in message and "\n" not in message, message
        return "one-line error"
    return "read"


@pytest.mark.slow
def test_damaged_traces_read_or_fail_with_one_line(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for seed in range(300):
        trace = mutate_trace(SOURCE, tmp_path / f"t{seed}", seed)
        try:
            outcomes[_outcome(trace)] += 1
        except (AssertionError, DfcompassError):
            raise
        except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts: MemoryError, OverflowError...
            pytest.fail(f"seed {seed}: {type(exc).__name__}: {exc}")
        shutil.rmtree(trace)
    assert outcomes["read"] > 10 and outcomes["one-line error"] > 100, outcomes


@pytest.mark.parametrize("damaged", FIXTURES, ids=[p.name for p in FIXTURES])
def test_traces_that_once_failed_stay_fixed(damaged: Path, tmp_path: Path) -> None:
    """Damage that once allocated tens of GiB (a string id of 2^31, sized tables) or overflowed (a
    timestamp of 2^64 - 1 inside a packet), a clock of 0 Hz or an offset past year 9999 in the
    metadata; each fixture holds only the damaged files."""
    trace = tmp_path / "t"
    shutil.copytree(SOURCE, trace)
    for stream in damaged.iterdir():
        shutil.copy(stream, trace / stream.name)
    assert _outcome(trace) in ("read", "one-line error")
