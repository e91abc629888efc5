"""Seeded command lines (tests/fuzz/cli_args.py, the fuzzer's `cli` kind): every one answers or
ends in one error line with exit 1 or 2; none is a traceback, an internal error or another exit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.fuzz.cases import classify, prepare


def test_hostile_command_lines_answer_or_fail_in_one_line(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for seed in range(40):
        folder, run = prepare("cli", seed, tmp_path)
        outcome, detail = classify((folder,), run)
        assert outcome in ("ok", "one-line error"), (seed, outcome, detail)
        outcomes[outcome] += 1
    assert outcomes["ok"] and outcomes["one-line error"], outcomes  # both paths are exercised
