"""Analysis commands run with the cyclic garbage collector off, and give it back as they found it
(the dfcompass process itself freezes what they made instead: it exits next); commands that run the
user's program keep it."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest

from tc_analyses import cli
from tc_analyses.cli_support import without_cycle_collector

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


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


def test_an_in_process_run_gets_its_collector_back_and_nothing_frozen() -> None:
    from click.testing import CliRunner

    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(cli.main, ["info", str(TRACE)])
    assert result.exit_code == 0, result.output
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_the_process_freezes_what_the_command_made_before_its_last_collection() -> None:
    """The dfcompass process itself ends after its command: the objects the command made are frozen,
    so the full collection Python runs at exit does not scan them (3.4 s of a 1M-event analyze)."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 0, file=sys.stderr))\n"
             f"sys.argv = ['dfcompass', 'info', {str(TRACE)!r}]\n"
             "from tc_analyses.cli import main\n"
             "main()\n")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "frozen at exit: True" in ran.stderr


def test_a_run_that_is_not_standalone_gets_its_collector_back() -> None:
    """A caller's run with standalone_mode=False is never the process's own command line, even after
    one that was (the flag is set per run, not left from the last)."""
    from tc_analyses.cli_support import State

    frozen = gc.get_freeze_count()
    State.exits_after_command = True  # as a standalone run on sys.argv left it
    try:
        cli.main.main(["info", str(TRACE)], standalone_mode=False)
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        State.exits_after_command = False
