"""Analysis commands run with the cyclic garbage collector off, and give it back as they found it;
commands that run the user's program keep it."""

from __future__ import annotations

import gc

import pytest

from tc_analyses import cli
from tc_analyses.cli_support import without_cycle_collector


def test_off_while_the_command_runs_and_restored_after_an_error() -> None:
    seen = []

    @without_cycle_collector
    def command() -> None:
        seen.append(gc.isenabled())
        raise ValueError("boom")

    assert gc.isenabled()
    with pytest.raises(ValueError):
        command()
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(ValueError):
            command()
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_the_user_program_keeps_its_collector() -> None:
    source = open(cli.__file__, encoding="utf-8").read()
    for name in ("record", "verify", "demo"):
        head = source[:source.index(f"\ndef {name}(")]
        decorators = head[head.rindex("@main.command"):]
        assert "without_cycle_collector" not in decorators, name
    assert source.count("@without_cycle_collector") >= 10
