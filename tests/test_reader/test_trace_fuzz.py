"""Seeded damage to a small trace: every command path reads it or fails with one line naming it."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.fuzz.cases import TRACE, classify, read_like_the_commands
from tests.fuzz.trace_mutations import mutate_trace
from tests.helpers import REPO_ROOT

SOURCE = TRACE
FIXTURES = sorted((REPO_ROOT / "tests" / "data" / "fuzz" / "traces").iterdir())


def _outcome(trace: Path) -> str:
    """Read, pair, build the graph and run the generated analyses, as `info` and `analyze` do."""
    outcome, detail = classify((trace,), lambda: read_like_the_commands(trace))
    assert outcome in ("ok", "one-line error"), f"{trace}: {outcome}: {detail}"
    return "read" if outcome == "ok" else outcome


@pytest.mark.slow
def test_damaged_traces_read_or_fail_with_one_line(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for seed in range(300):
        trace = mutate_trace(SOURCE, tmp_path / f"t{seed}", seed)
        outcomes[_outcome(trace)] += 1
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
