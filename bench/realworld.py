"""Real programs nobody on the project wrote: record them, run every command, check the edges.

    .venv/bin/python bench/realworld.py [--examples DIR] [--only NAME,...] [--skip-commands]

Records public example programs from their own code (pytorch/examples, HuggingFace BERT and
GPT-2 built from their configs, torchvision's ResNet-50) with small settings, and prints a table:

* whether the program ran untraced and recorded;
* its traced run against its untraced run (the recording cost);
* the time of each command (``info``, ``analyze``, ``build-analyses``, ``parallelism``,
  ``recommend-placement``, ``report``, and ``ranks`` for a job with ranks), run on the folder
  ``record`` wrote (each command picks the main process itself), against the traced run's
  duration (issue 19: at most 10x);
* the precision and recall of the tensor edges against PyTorch's execution trace observer, run
  beside the recorder in a third run (tc_analyses/analyses/edge_check.py).

Programs that download data get fake data (bench/realworld_shim). ``--examples`` is a checkout,
or a git repository, of https://github.com/pytorch/examples (default: $DFCOMPASS_EXAMPLES, else
a clone into bench/out/realworld/examples). transformers goes into bench/out/realworld/site, kept
out of the venv: it wants another click than dfcompass pins. A program whose packages cannot load
here (torchvision built for CUDA beside CPU torch) is listed as not run, with the reason.
Writes bench/out/realworld/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tc_analyses.analyses.edge_check import check_edges  # noqa: E402
from tc_analyses.errors import DfcompassError  # noqa: E402

OUT = ROOT / "bench" / "out" / "realworld"
SHIM = ROOT / "bench" / "realworld_shim"
OURS = ROOT / "bench" / "realworld_programs"
EXAMPLES_URL = "https://github.com/pytorch/examples"
TRANSFORMERS = "transformers==5.24.0"
TORCHVISION = "torchvision==0.28.0"  # the one made for torch 2.13
BOUND = 10.0  # issue 19: every command within 10x the traced run


@dataclass(frozen=True)
class Program:
    name: str
    folder: str  # in pytorch/examples; "" for ours (bench/realworld_programs)
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()  # a script run once before (untraced)
    # (missing file, stand-in): a data file that a partial checkout lacks, made from another
    fill: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # set for its runs
    launch: tuple[str, ...] = ()  # python arguments before the script (a launcher: -m torch.distributed.run ...)


SHAPES = "@tests/torch_programs"  # a folder of ours, not of pytorch/examples
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2")
SMALL_LM = ("--emsize", "64", "--nhid", "64", "--nhead", "2")  # --dry-run still evaluates the whole text
WIKITEXT = (("data/wikitext-2/train.txt", "data/wikitext-2/valid.txt"),)
PROGRAMS = (
    Program("regression", "regression", ("main.py",)),
    # It saves a numpy array with torch.save, which torch >= 2.6 no longer loads by default.
    Program("time-sequence", "time_sequence_prediction", ("train.py", "--steps", "1"),
            setup=("generate_sine_wave.py",), env=(("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"),)),
    Program("gcn", "gcn", ("main.py", "--epochs", "3")),
    Program("mnist", "mnist", ("main.py", "--epochs", "1", "--dry-run"), ("torchvision",)),
    Program("vae", "vae", ("main.py", "--epochs", "1"), ("torchvision",)),
    Program("word-lm-lstm", "word_language_model", ("main.py", "--epochs", "1", "--dry-run", *SMALL_LM), fill=WIKITEXT),
    Program("word-lm-transformer", "word_language_model",
            ("main.py", "--epochs", "1", "--dry-run", "--model", "Transformer", *SMALL_LM), fill=WIKITEXT),
    Program("siamese", "siamese_network", ("main.py", "--epochs", "1", "--dry-run"), ("torchvision",)),
    Program("imagenet-resnet18", "imagenet", ("main.py", "-a", "resnet18", "--dummy", "--epochs", "1", "-b", "8",
                                              "-j", "0"), ("torchvision",), env=(("DFCOMPASS_BENCH_FAKE_SIZE", "32"),)),
    Program("dcgan", "dcgan", ("main.py", "--dataset", "fake", "--dry-run", "--niter", "1", "--batchSize", "8",
                               "--workers", "0"), ("torchvision",)),
    Program("resnet50", "", ("resnet50.py",), ("torchvision",)),
    Program("bert", "", ("hf_models.py", "bert"), ("transformers",)),
    Program("gpt2", "", ("hf_models.py", "gpt2"), ("transformers",)),
    # The shapes of real training programs (issue 32): ours, in tests/torch_programs.
    Program("dataloader-workers", SHAPES, ("loader_workers.py",)),
    Program("spawn-children", SHAPES, ("spawn_children.py",)),
    Program("torchrun-ddp", SHAPES, ("ddp_train.py",), launch=TORCHRUN, env=(("DFCOMPASS_BENCH_ET_RANK", "0"),)),
    Program("compiled-cnn", SHAPES, ("compiled.py", "cnn")),
    Program("compiled-transformer-break", SHAPES, ("compiled.py", "transformer", "graph-break")),
    Program("compiled-reduce-overhead", SHAPES, ("compiled.py", "cnn", "reduce-overhead")),
    Program("own-profiler", SHAPES, ("own_profiler.py", "user.json")),
)


@dataclass
class Outcome:
    name: str
    status: str = "ok"  # ok, or why not
    untraced_s: float | None = None
    traced_s: float | None = None
    nodes: int | None = None
    edges: int | None = None
    trace_bytes: int | None = None
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> seconds, ratio, rc, output bytes
    precision: float | None = None
    recall: float | None = None
    edge_check: dict[str, Any] = field(default_factory=dict)


def _dfcompass() -> list[str]:
    return [sys.executable, "-m", "tc_analyses.cli"]


def examples_checkout(given: str | None) -> Path | None:
    """A work tree of pytorch/examples: the given checkout, or one made from a git repository."""
    source = given or os.environ.get("DFCOMPASS_EXAMPLES")
    target = OUT / "examples"
    if source and (Path(source) / "mnist" / "main.py").is_file():
        return Path(source)
    if (target / "mnist" / "main.py").is_file():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    if source:  # a git repository (bare or not): its HEAD's files
        return target if _extract(_git_dir(Path(source)), target) else None
    clone = subprocess.run(["git", "clone", "-q", "--depth", "1", EXAMPLES_URL, str(target)], capture_output=True,
                           timeout=300)
    return target if clone.returncode == 0 else None


def _extract(git_dir: Path, target: Path) -> bool:
    """HEAD's files of `git_dir` into `target`; blobs the repository lacks (a partial mirror
    leaves out its largest files) are skipped."""
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "HEAD"], capture_output=True, text=True)
    if listing.returncode != 0:
        return False
    for line in listing.stdout.splitlines():
        meta, path = line.split("\t", 1)
        _, kind, sha = meta.split()
        if kind != "blob":
            continue
        blob = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", sha], capture_output=True)
        if blob.returncode == 0:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(blob.stdout)
    return True


def _git_dir(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def extra_site() -> tuple[Path | None, str]:
    """transformers and torchvision installed into OUT/site (versions as the venv's, except click)."""
    site = OUT / "site"
    if (site / "transformers").is_dir() and (site / "torchvision").is_dir():
        return site, ""
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    constraints = OUT / "constraints.txt"
    constraints.parent.mkdir(parents=True, exist_ok=True)
    constraints.write_text("".join(line + "\n" for line in freeze.splitlines()
                                   if "==" in line and not line.lower().startswith(("click==", "dfcompass"))))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), "-c", str(constraints),
                           TRANSFORMERS], capture_output=True, text=True)
    if done.returncode != 0:
        return None, (done.stderr.strip().splitlines() or ["pip failed"])[-1]
    # torchvision without its dependencies: torch, numpy and pillow are the venv's.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), TORCHVISION],
                   capture_output=True, text=True)
    return site, ""


def environment(site: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (SHIM, ROOT, site) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("DFCOMPASS_BENCH_ET", None)
    if "torchvision::nms does not exist" in _import_error("torchvision", env):
        env["DFCOMPASS_BENCH_TORCHVISION_STUB"] = "1"  # a CUDA torchvision beside CPU torch (the shim's MOCK)
    return env


def _import_error(module: str, env: dict[str, str]) -> str:
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, text=True)
    return "" if probe.returncode == 0 else probe.stderr


def missing_module(module: str, env: dict[str, str]) -> str:
    """Why `module` cannot be imported by the programs ("" when it can)."""
    error = _import_error(module, env)
    if not error:
        return ""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return f"{module} does not load here ({lines[-1][:120] if lines else 'no message'})"


def _timed(command: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> tuple[int, float]:
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        try:
            rc = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.perf_counter() - start


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main_trace(job: Path) -> Path | None:
    """The job's main process, as every command chooses it (rank 0, else the process record started)."""
    from tc_analyses.reader.job import choose_process

    if not job.is_dir() or not any((p / "metadata").is_file() for p in job.iterdir()):
        return None
    return choose_process(job).path


COMMANDS = (
    ("info", lambda t, o: ["info", str(t)]),
    ("analyze", lambda t, o: ["analyze", str(t)]),
    ("build-analyses", lambda t, o: ["build-analyses", str(t), "-o", str(o)]),
    ("parallelism", lambda t, o: ["parallelism", str(t), "-o", str(o)]),
    ("recommend-placement", lambda t, o: ["recommend-placement", str(t), "--devices", "cpu,cuda:0=H100", "-o", str(o)]),
    ("report", lambda t, o: ["report", str(t), "-o", str(o / "report.html")]),
)
RANKS = (("ranks", lambda t, o: ["ranks", str(t), "-o", str(o)]),)


def run_program(program: Program, examples: Path | None, env: dict[str, str], skip_commands: bool,
                log: Any) -> Outcome:
    outcome = Outcome(program.name)
    if program.folder and not program.folder.startswith("@") and examples is None:
        outcome.status = "no pytorch/examples checkout"
        return outcome
    for module in program.needs:
        why = missing_module(module, env)
        if why:
            outcome.status = why
            return outcome
    env = dict(env, **dict(program.env))
    work = OUT / "runs" / program.name
    shutil.rmtree(work, ignore_errors=True)
    cwd = work / "cwd"
    if program.folder.startswith("@"):
        cwd.mkdir(parents=True)
        script_dir = ROOT / program.folder[1:]
    elif program.folder:
        assert examples is not None
        shutil.copytree(examples / program.folder, cwd)
        script_dir = cwd
        for missing, stand_in in program.fill:
            if not (cwd / missing).exists():
                shutil.copyfile(cwd / stand_in, cwd / missing)
                log(f"  {program.name}: {missing} is not in the checkout: a copy of {stand_in} stands in")
    else:
        cwd.mkdir(parents=True)
        script_dir = OURS
    logfile = work / "log.txt"
    python = [sys.executable, *program.launch, str(script_dir / program.args[0]), *program.args[1:]]
    for script in program.setup:
        _timed([sys.executable, str(script_dir / script)], cwd, env, 600, logfile)
    rc, outcome.untraced_s = _timed(python, cwd, env, 1800, logfile)
    if rc != 0:
        outcome.status = f"fails untraced (exit {rc}; see {logfile.relative_to(ROOT)})"
        return outcome
    log(f"  {program.name}: untraced {outcome.untraced_s:.1f} s")
    rc, outcome.traced_s = _timed([*_dfcompass(), "record", "-o", str(work / "job"), "--", *python], cwd, env,
                                  max(1800, 30 * outcome.untraced_s), logfile)
    trace = main_trace(work / "job")
    if rc != 0 or trace is None:
        outcome.status = f"fails recorded (exit {rc}; see {logfile.relative_to(ROOT)})"
        return outcome
    log(f"  {program.name}: traced {outcome.traced_s:.1f} s")
    from tc_analyses.reader import read_trace

    data = read_trace(trace)
    outcome.nodes, outcome.edges = len(data.table("node_begin")), len(data.table("tensor_edge"))
    outcome.trace_bytes = _size(trace)
    del data
    et_env = dict(env, DFCOMPASS_BENCH_ET=str(work / "et.json"))
    rc, _ = _timed([*_dfcompass(), "record", "-o", str(work / "job-et"), "--", *python], cwd, et_env,
                   max(1800, 30 * outcome.untraced_s), logfile)
    et_trace = main_trace(work / "job-et")
    if rc != 0:  # the observer's file then ends where the program died: checked up to there
        outcome.edge_check["observer_run_exit"] = rc
        log(f"  {program.name}: the run under the observer exited {rc}")
    if et_trace is not None and (work / "et.json").is_file():
        try:
            check = check_edges(et_trace, work / "et.json")
        except DfcompassError as exc:
            outcome.status = f"edges not checked: {exc}"
            return outcome
        outcome.precision, outcome.recall = check.precision, check.recall
        outcome.edge_check.update({**asdict(check), "precision": check.precision, "recall": check.recall})
        log(f"  {program.name}: edges precision {check.precision}, recall {check.recall}")
    if skip_commands:
        return outcome
    from tc_analyses.reader.job import job_traces

    ranked = any(p.rank is not None for p in job_traces(work / "job"))
    for name, arguments in COMMANDS + (RANKS if ranked else ()):
        out = work / "out" / name
        out.mkdir(parents=True, exist_ok=True)
        limit = max(120.0, 3 * BOUND * outcome.traced_s)
        rc, seconds = _timed([*_dfcompass(), *arguments(work / "job", out)], cwd, env, limit, logfile)
        outcome.commands[name] = {"seconds": seconds, "ratio": seconds / outcome.traced_s, "rc": rc,
                                  "output_bytes": _size(out), "timed_out": rc == 124}
        log(f"  {program.name}: {name} {seconds:.1f} s (exit {rc})")
    return outcome


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(outcomes: list[Outcome]) -> str:
    names = [name for name, _ in COMMANDS + RANKS]
    head = ["program", "status", "nodes", "traced/untraced", *(f"{n} x" for n in names), "precision", "recall"]
    rows = [head]
    for o in outcomes:
        cells = [o.name, o.status if o.status == "ok" else "not run", _cell(o.nodes, ",d"),
                 _cell(o.traced_s / o.untraced_s if o.traced_s and o.untraced_s else None, ".2f")]
        for name in names:
            c = o.commands.get(name)
            cells.append("-" if c is None else "timeout" if c["timed_out"] else
                         f"{c['ratio']:.2f}" + ("" if c["rc"] == 0 else f" (exit {c['rc']})")
                         + (" MISSED" if c["ratio"] > BOUND else ""))
        cells += [_cell(o.precision, ".3f"), _cell(o.recall, ".3f")]
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{o.name}: not run: {o.status}" for o in outcomes if o.status != "ok"]
    return "\n".join(lines + [""] + notes)


def run(only: set[str] | None = None, examples_arg: str | None = None, skip_commands: bool = False,
        log: Any = print) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    programs = [p for p in PROGRAMS if not only or p.name in only]
    examples = examples_checkout(examples_arg) if any(p.folder for p in programs) else None
    site, why = extra_site() if any(p.needs for p in programs) else (None, "")
    if why:
        log(f"transformers and torchvision not installed: {why}")
    env = environment(site)
    outcomes: dict[str, Outcome] = {}
    rows: list[Outcome] = []
    for program in programs:  # results.json after each program: a run cut short keeps what it did
        outcomes[program.name] = run_program(program, examples, env, skip_commands, log)
        # With --only, the other programs' rows stay, as results.json has them now (another run
        # with other programs may have written it meanwhile): the table covers every program.
        kept = {p["name"]: Outcome(**p) for p in _last_results().get("programs", [])} if only else {}
        rows = [outcomes.get(p.name) or kept[p.name] for p in PROGRAMS if p.name in outcomes or p.name in kept]
        result = {"programs": [asdict(o) for o in rows], "bound": BOUND,
                  "examples": str(examples) if examples else None}
        (OUT / "results.json").write_text(json.dumps(result, indent=1))
    result["table"] = table(rows)
    return result


def _last_results() -> dict[str, Any]:
    try:
        return dict(json.loads((OUT / "results.json").read_text()))
    except (OSError, ValueError):
        return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", help="a checkout or git repository of pytorch/examples")
    parser.add_argument("--only", help="comma-separated program names: " + ", ".join(p.name for p in PROGRAMS))
    parser.add_argument("--skip-commands", action="store_true", help="record and check edges only")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - {p.name for p in PROGRAMS}
    if unknown:
        parser.error(f"unknown program(s): {', '.join(sorted(unknown))}")
    print(run(only, args.examples, args.skip_commands)["table"])


if __name__ == "__main__":
    main()
