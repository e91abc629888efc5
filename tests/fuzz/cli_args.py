"""Seeded command lines for the fuzzer's `cli` kind: a command of `dfcompass` (not those that run a
program: record, demo, verify) with its arguments and options drawn from real inputs (copies made
in the case's folder) and hostile values. The case runs in that folder, so every relative path and
every output stays inside it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import click

from tests.helpers import REPO_ROOT

RUNS_A_PROGRAM = frozenset({"record", "demo", "verify"})
TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"
GRAPH = REPO_ROOT / "tests" / "data" / "graphs" / "forbidden-and-links.json"
XML = REPO_ROOT / "tests" / "golden" / "xml" / "all-classes" / "api.xml"
HOSTILE = ["", "-1", "0", "1e999", "NaN", "99999999999999999999", "<&'\">", "ünï©", "x" * 300, "*", "(.|.|.)+Z",
           "..", "/dev/null", "/dev/zero", "nosuch", "cpu,cuda:0", "cuda:-1", "json", "text", "--help"]


def _inputs(folder: Path) -> list[str]:
    """Copies of real inputs in `folder`: a trace, a Kineto file, a graph file, a plain file, a folder."""
    shutil.copytree(TRACE, folder / "trace")
    (folder / "kineto.json").write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                                       '"pid": 1, "tid": 1, "ts": 10, "dur": 5}]}')
    shutil.copy(GRAPH, folder / "graph.json")
    shutil.copy(XML, folder / "api.xml")
    (folder / "notes.txt").write_text("not a trace")
    (folder / "empty").mkdir()
    return ["trace", "kineto.json", "graph.json", "api.xml", "notes.txt", "empty", "out"]


def command_line(main: click.Group, seed: int, folder: Path) -> list[str]:
    """The arguments of case `seed` (its inputs copied into `folder`, where it runs)."""
    rng = random.Random(seed)
    paths = _inputs(folder)
    name = rng.choice(sorted(n for n in main.commands if n not in RUNS_A_PROGRAM))
    command = main.commands[name]
    args = [name]
    for param in command.params:
        if isinstance(param, click.Argument):
            count = 1 if param.nargs == 1 else rng.randint(0, 2)
            args += [_input(rng, paths) for _ in range(count)]
    options = [p for p in command.params if isinstance(p, click.Option)]
    chosen = rng.sample(options, k=min(len(options), rng.randint(0, 4)))
    chosen += [p for p in options if p.required and p not in chosen and rng.random() < 0.9]
    for option in chosen:
        flag = option.opts[0]
        if option.is_flag:
            args.append(flag)
            continue
        choices = getattr(option.type, "choices", None)
        if choices and rng.random() < 0.6:
            value = str(rng.choice(list(choices)))
        elif flag == "--devices" and rng.random() < 0.7:
            value = rng.choice(["cpu,cuda:0", "cpu", "cpu,cuda:0=H100,hostB:cuda:0"])
        elif flag == "--xml" and rng.random() < 0.7:
            value = "api.xml"
        elif flag in ("-o", "--output", "--csv", "--cache") or rng.random() < 0.3:
            value = rng.choice(paths)
        else:
            value = rng.choice(HOSTILE)
        args += [flag, value]
    return args


def _input(rng: random.Random, paths: list[str]) -> str:
    """A positional argument: the trace more often than not (the commands' usual input)."""
    roll = rng.random()
    return "trace" if roll < 0.5 else rng.choice(paths) if roll < 0.9 else rng.choice(HOSTILE)
