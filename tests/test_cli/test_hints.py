"""Every hint the CLI prints names something that exists (issue 39): each `dfcompass COMMAND` in the
output of the commands run on the committed traces is a command, and each `--option` is an option
of the command the hint names (or, when it names none, of the command that printed it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import click
import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = [DATA / "succeed" / "all-classes", DATA / "tf" / "keras-cnn", DATA / "cuda" / "h200-mlp" / "trace",
          DATA / "jobs" / "ddp-2rank"]
COMMAND = re.compile(r"dfcompass ([a-z][a-z-]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _options(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--")}


def _checked(printed_by: str, text: str) -> list[str]:
    """The hints of `text` that name a command or an option that does not exist."""
    from tc_analyses.cli import main

    wrong = []
    for line in text.splitlines():
        named = COMMAND.findall(line)
        for name in named:
            if name not in main.commands:
                wrong.append(f"{line.strip()!r}: no command {name}")
        for match in OPTION.finditer(line):
            before = COMMAND.findall(line[:match.start()])
            owner = before[-1] if before else printed_by
            if owner in main.commands and match.group(1) not in _options(main.commands[owner]) | _options(main):
                wrong.append(f"{line.strip()!r}: {owner} has no {match.group(1)}")
    return wrong


@pytest.mark.slow
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_every_hint_names_a_real_command_and_option(trace: Path, cli: Callable[..., Any]) -> None:
    from tc_analyses.cli import main
    from tc_analyses.registry import ANALYSES

    runs = [("analyze", [trace]), ("analyze", [trace, "--details"]), ("info", [trace])]
    runs += [(entry.key, [trace]) for entry in ANALYSES]
    wrong: list[str] = []
    for command, args in runs:
        result = cli(command, *args)
        assert result.exit_code in (0, 1), (command, result.stderr)
        wrong += _checked(command, result.stdout + result.stderr)
    assert not wrong, "\n".join(sorted(set(wrong)))
    assert set(main.commands) >= {command for command, _ in runs}


def test_the_checker_finds_a_hint_that_names_nothing() -> None:
    assert _checked("analyze", "try --operator") == ["'try --operator': analyze has no --operator"]
    assert _checked("analyze", "run dfcompass nosuch first") == ["'run dfcompass nosuch first': no command nosuch"]
    assert _checked("analyze", "dfcompass sequences --operator NAME --min-length N") == []
