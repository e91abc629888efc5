"""Damaged graph files and plans (tests/fuzz/json_mutations.py, the fuzzer's `graph` and `plan`
kinds): every one is read, or refused in one line naming the file; none is an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.cases import classify, prepare


@pytest.mark.parametrize("kind", ["graph", "plan"])
def test_damaged_placement_files_are_read_or_refused_in_one_line(kind: str, tmp_path: Path) -> None:
    outcomes = []
    for seed in range(60):
        path, run = prepare(kind, seed, tmp_path)
        outcome, detail = classify((path,), run)
        assert outcome in ("ok", "one-line error"), (kind, seed, outcome, detail)
        outcomes.append(outcome)
    assert "one-line error" in outcomes  # the mutations do damage: some files are refused
