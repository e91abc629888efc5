"""One fuzz case of each input kind, run the way the CLI commands run it, classified by outcome.

Kinds (the seed picks the damage; see the *_mutations modules):

* ``trace``: a damaged dfcompass trace through what ``info``, ``analyze`` and ``states`` do
  (read, pair, build the graph, run the generated analyses);
* ``lttng``: a damaged LTTng trace through ``info`` (the bt2 reader, with its babeltrace2 child);
* ``kineto``: a damaged Kineto JSON through ``import-kineto``;
* ``xml``: a damaged Trace Compass XML analysis through ``states --xml``;
* ``graph``: a damaged graph file through what ``recommend-placement`` reads of it;
* ``plan``: a damaged plan through what ``verify`` reads of it before it runs anything;
* ``cli``: a command line of real inputs and hostile values (tests/fuzz/cli_args.py), run in the
  case's folder: any exit but 0, 1 or 2, a traceback, an internal error or more than one error line
  is a failure;
* ``ctf2``: a hand-made CTF 2 trace (every field class kind) with damaged streams or a damaged
  metadata fragment, through the general CTF reader.

Outcomes: ``ok``; ``one-line error`` (a DfcompassError of one line naming the input);
``bad message`` (a DfcompassError that does not); ``internal error: <type>`` (anything else).
Signal deaths and hangs are what scripts/fuzz.py counts around a worker process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tc_analyses.errors import DfcompassError
from tests.fuzz.json_mutations import graph_document, mutate_json, plan_document
from tests.fuzz.kineto_mutations import mutate
from tests.fuzz.trace_mutations import mutate_trace
from tests.fuzz.xml_mutations import mutate_xml
from tests.helpers import REPO_ROOT

TRACE = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"
LTTNG = REPO_ROOT.parent / "shared" / "traces" / "lttng" / "context-switches-ust"
KINDS = ("trace", "lttng", "kineto", "xml", "graph", "plan", "cli", "ctf2")


def read_like_the_commands(trace: Path) -> None:
    """Read, pair, build the graph and run the generated analyses, as `info` and `analyze` do."""
    from tc_analyses.export import reports
    from tc_analyses.inputs import TraceInputs

    inputs = TraceInputs(trace)
    reports.info_text(inputs.info)
    inputs.activity
    inputs.graph
    inputs.summary()


def _info(trace: Path) -> None:
    from tc_analyses.export import reports
    from tc_analyses.inputs import TraceInputs

    reports.info_text(TraceInputs(trace).info)


_xml_sources: list[tuple[str, bytes]] = []


def _damaged_ctf2(workdir: Path, seed: int) -> Path:
    """The hand-made CTF 2 trace of tests/test_reader/test_ctf2_reader.py (every field class kind),
    its streams damaged (odd seeds) or one metadata fragment (even seeds)."""
    import json
    import random
    import shutil

    from tests.test_reader.test_ctf2_reader import FRAGMENTS, write_trace

    base = write_trace(workdir / f"ctf2-{seed}-base")
    out = workdir / f"ctf2-{seed}"
    if seed % 2:
        mutate_trace(base, out, seed)
    else:
        shutil.copytree(base, out)
        which = random.Random(seed).randrange(len(FRAGMENTS))
        texts = [json.dumps(f).encode() for f in FRAGMENTS]
        texts[which] = mutate_json(json.loads(texts[which]), seed)
        (out / "metadata").write_bytes(b"".join(b"\x1e" + t + b"\n" for t in texts))
    shutil.rmtree(base)
    return out


def _read_ctf(trace: Path) -> None:
    """Every record, through our general reader only (what `info --reader ctf` reads)."""
    from tc_analyses.reader.any_ctf import iter_any_ctf

    for _ in iter_any_ctf(trace, reader="ctf"):
        pass


def _xml_source(seed: int) -> tuple[str, bytes]:
    if not _xml_sources:
        from tc_analyses.export.tracecompass.render import render_xml
        from tc_analyses.inputs import TraceInputs

        _xml_sources.extend(sorted(render_xml(TraceInputs(TRACE).facts).items()))
    return _xml_sources[seed % len(_xml_sources)]


def prepare(kind: str, seed: int, workdir: Path) -> tuple[Path, Callable[[], object]]:
    """The damaged input of case (`kind`, `seed`) under `workdir`, and the call that consumes it."""
    if kind == "trace":
        trace = mutate_trace(TRACE, workdir / f"trace{seed}", seed)
        return trace, lambda: read_like_the_commands(trace)
    if kind == "lttng":
        trace = mutate_trace(LTTNG, workdir / f"lttng{seed}", seed)
        return trace, lambda: _info(trace)
    if kind == "kineto":
        from tracer.importers import import_kineto

        src = workdir / f"kineto{seed}.json"
        src.write_bytes(mutate(seed))
        return src, lambda: import_kineto(src, workdir / f"kineto{seed}-out")
    if kind == "xml":
        from tc_analyses.app import build

        name, data = _xml_source(seed)
        xml = workdir / f"{seed}-{name}"
        xml.write_bytes(mutate_xml(data, seed))
        return xml, lambda: list(build.states(TRACE, [xml], "*", None))
    if kind == "graph":
        from tc_analyses.analyses.placement.graph_file import problem_from_graph_file
        from tc_analyses.perf.devices import parse_devices

        graph = workdir / f"graph{seed}.json"
        graph.write_bytes(mutate_json(graph_document(), seed))
        return graph, lambda: problem_from_graph_file(graph, parse_devices("cpu,cuda:0"))
    if kind == "plan":
        from tracer.graph_program import Plan

        plan = workdir / f"plan{seed}.json"
        plan.write_bytes(mutate_json(plan_document(), seed))
        return plan, lambda: Plan.load(plan)
    if kind == "cli":
        folder = workdir / f"cli{seed}"
        folder.mkdir(parents=True)
        return folder, lambda: _run_cli(seed, folder)
    if kind == "ctf2":
        trace = _damaged_ctf2(workdir, seed)
        return trace, lambda: _read_ctf(trace)
    raise ValueError(f"unknown fuzz kind {kind!r}")


class CliFailure(Exception):
    """A command line that ended otherwise than in an answer or one error line."""


def _run_cli(seed: int, folder: Path) -> None:
    import os

    from click.testing import CliRunner

    from tc_analyses.cli import main
    from tests.fuzz.cli_args import command_line

    args = command_line(main, seed, folder)
    here = os.getcwd()
    os.chdir(folder)  # relative paths and outputs stay in the case's folder
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        os.chdir(here)
    stderr = result.stderr if result.stderr_bytes is not None else ""
    errors = [line for line in stderr.splitlines() if line.startswith("dfcompass: error:")]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise CliFailure(f"{args}: {type(result.exception).__name__}: {result.exception}")
    if result.exit_code not in (0, 1, 2) or "internal error" in stderr or "Traceback" in stderr or len(errors) > 1:
        raise CliFailure(f"{args}: exit {result.exit_code}: {stderr[-300:]}")
    if errors:
        raise DfcompassError(f"{folder}: {errors[0]}")  # one line: what the classifier counts


def classify(inputs: tuple[Path, ...], run: Callable[[], object]) -> tuple[str, str]:
    """(outcome, detail) of one case; `inputs` are the files an error may name."""
    from tc_analyses.perf.problem import PlacementError
    from tracer.graph_program import PlanError
    from tracer.importers import KinetoImportError

    try:
        run()
    except (DfcompassError, KinetoImportError, PlanError, PlacementError) as exc:
        message = str(exc)
        named = any(str(path) in message for path in inputs)
        if named and "\n" not in message:
            return "one-line error", ""
        return "bad message", message[:200]
    except CliFailure as exc:
        return "cli failure", str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
        return f"internal error: {type(exc).__name__}", str(exc)[:200]
    return "ok", ""
