"""`dfcompass analyze JOB/` on Dask: a LocalCluster, and a `dask scheduler` with two `dask worker`
processes on localhost, must give exactly what the traces analysed one after another give."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tc_analyses.cluster import TraceTask, analyze_job, run_trace
from tc_analyses.model.activity_store import cache_file
from tests.helpers import subprocess_env

JOB = Path(__file__).resolve().parent / "data" / "traces" / "jobs" / "ddp-2rank"
DASK = Path(sys.executable).with_name("dask")

pytestmark = pytest.mark.slow


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A copy of the committed two-rank job (its cache goes inside, as by default)."""
    copy = tmp_path / "job"
    shutil.copytree(JOB, copy, ignore=shutil.ignore_patterns(".dfcompass-cache"))  # a run on the committed job
    return copy


def _analysis(cli: Any, *args: Any) -> dict[str, Any]:
    result = cli("analyze", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_local_cluster_gives_what_the_traces_give_one_after_another(job: Path, cli: Any) -> None:
    reference = _analysis(cli, job, "--in-process")
    on_dask = _analysis(cli, job, "--workers", "2")
    assert on_dask == reference
    ranked = [r for r in reference["ranks"] if "analysis" in r]
    assert len(ranked) == 2 and len(reference["ranks"]) == 4  # the launcher's two processes recorded nothing
    assert all(r["analysis"]["sections"] for r in ranked)  # the seed analyses ran on the workers too
    # the job's top nodes are the processes' added up
    op = reference["top_nodes"][0]["op"]
    per_rank = [n for r in ranked for n in r["analysis"]["top_nodes"] if n["op"] == op]
    assert reference["top_nodes"][0]["total_ns"] == sum(n["total_ns"] for n in per_rank)
    assert reference["top_nodes"][0]["count"] == sum(n["count"] for n in per_rank)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def dask_processes(tmp_path: Path) -> Iterator[str]:
    """A `dask scheduler` and two `dask worker` processes on localhost; all stopped afterwards."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with open(logs / f"{name}.log", "wb") as log:
            started.append(subprocess.Popen([str(DASK), *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=tmp_path, start_new_session=True))

    try:
        start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard")
        for n in range(2):
            start(f"worker{n}", "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                  "--name", f"w{n}")
        from dask.distributed import Client

        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    assert all(p.poll() is not None for p in started)


def test_a_scheduler_and_two_workers_give_the_same(job: Path, cli: Any, dask_processes: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _analysis(cli, job, "--in-process", "--cache", job.parent / "reference-cache")
    monkeypatch.chdir(job.parent)  # a relative job folder: the workers run in another folder
    on_cluster = _analysis(cli, job.name, "--scheduler", dask_processes)
    assert on_cluster["job"] == job.name  # as the user named it; every trace path is absolute
    assert {**on_cluster, "job": str(job)} == reference


def test_each_trace_s_activity_is_kept_as_parquet_and_read_back(job: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    traces = sorted(p for p in job.iterdir() if (p / "metadata").is_file())
    first = analyze_job(job, in_process=True, cache=cache, sections=("overhead", "breakdown"))
    again = analyze_job(job, in_process=True, cache=cache, sections=("overhead", "breakdown"))
    assert again.to_json(10) == first.to_json(10)
    used = [a for a in first.answers if a.document is not None]
    assert used and {a.activity_from for a in used} == {"trace"}
    assert {a.activity_from for a in again.answers if a.document is not None} == {"cache"}
    stored = [cache_file(cache, t) for t in traces]
    assert all(s.stat().st_mode & 0o055 for s in stored if s.exists())  # not mkdtemp's 0700: the job's users share it
    assert all((s / "nodes.parquet").is_file() for s, t in zip(stored, traces)
               if any(a.path == str(t) and a.document is not None for a in first.answers))
    # a trace written again is a new trace: its old activity is not read
    stream = next(p for p in traces[-1].iterdir() if p.name.startswith("node_begin"))
    os.utime(stream, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert cache_file(cache, traces[-1]) != stored[-1]
    answer = run_trace(TraceTask(str(traces[-1]), str(cache), 10, ("overhead", "breakdown"), "cpu"))
    before = next(a for a in first.answers if a.path == str(traces[-1]))
    assert answer.activity_from == "trace" and answer.document == before.document is not None


def test_a_damaged_cache_entry_is_a_miss_and_is_written_again(job: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    trace = next(p for p in sorted(job.iterdir()) if (p / "metadata").is_file() and p.name == "vm-18736")
    task = TraceTask(str(trace), str(cache), 10, ("overhead",), "cpu")
    first = run_trace(task)
    entry = cache_file(cache, trace)
    for damage in (lambda: (entry / "meta.json").write_text('{"format": 1}'), lambda: (entry / "gpu.parquet").unlink(),
                   lambda: (entry / "nodes.parquet").write_bytes(b"PAR1 truncated")):
        damage()
        again = run_trace(task)
        assert (again.activity_from, again.document) == ("trace", first.document), again.error
        assert run_trace(task).activity_from == "cache"  # rewritten whole


def test_an_edited_but_valid_entry_and_a_linked_cache_are_not_trusted(job: Path, tmp_path: Path) -> None:
    """A Parquet file rewritten by hand (valid, with a node renamed) was read as the trace's activity,
    and a cache folder that is a symbolic link was followed out of the job (issue 37, item 7): the
    first is a miss (each file's sha256 is kept), the second is never used."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cache = tmp_path / "cache"
    trace = next(p for p in sorted(job.iterdir()) if (p / "metadata").is_file() and p.name == "vm-18736")
    task = TraceTask(str(trace), str(cache), 10, ("overhead",), "cpu")
    first = run_trace(task)
    nodes = cache_file(cache, trace) / "nodes.parquet"
    table = pq.read_table(nodes)
    names = table.column("name").combine_chunks()
    edited = pa.DictionaryArray.from_arrays(names.indices, pa.array(["EDITED"] * len(names.dictionary)))
    pq.write_table(table.set_column(table.column_names.index("name"), "name", edited), nodes)
    again = run_trace(task)
    assert (again.activity_from, again.document) == ("trace", first.document) and "EDITED" not in str(again.document)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked-cache"
    linked.symlink_to(elsewhere)
    task = TraceTask(str(trace), str(linked), 10, ("overhead",), "cpu")
    assert run_trace(task).activity_from == "trace" and run_trace(task).activity_from == "trace"
    assert not any(elsewhere.iterdir())  # nothing written through the link


def test_an_unreachable_scheduler_is_one_line_and_exit_2(job: Path, cli: Any) -> None:
    for address, problem in ((f"tcp://127.0.0.1:{_free_port()}", "no Dask scheduler answers there"),
                             ("not an address", "not a scheduler address (tcp://HOST:PORT)"),
                             ("cpu,cuda:0", "not a scheduler address")):  # said at once, not after 10 s
        result = cli("analyze", job, "--no-sections", "--scheduler", address)
        assert result.exit_code == 2, result.stderr
        assert problem in result.stderr and result.stderr.count("\n") == 1


def test_a_job_of_traces_that_all_fail_says_so(tmp_path: Path, cli: Any) -> None:
    job = tmp_path / "job"
    job.mkdir()
    for name in ("vm-18728", "vm-18734"):  # the launcher's processes: they recorded no events
        shutil.copytree(JOB / name, job / name)
    result = cli("analyze", job, "--in-process", "--no-sections")
    assert result.exit_code == 1
    assert "no trace of the job could be analysed" in result.stderr and result.stderr.count("\n") == 1


def _report_text(path: Path) -> list[str]:
    """The page's text outside the inline plots (matplotlib names SVG ids at random)."""
    from lxml import html

    tree = html.parse(str(path))
    for svg in tree.getroot().iter("svg"):
        svg.getparent().remove(svg)
    return [t.strip() for t in tree.getroot().itertext() if t.strip()]


def test_a_job_report_has_a_section_per_process_made_on_the_cluster(job: Path, cli: Any, tmp_path: Path) -> None:
    reference = tmp_path / "in-process.html"
    on_dask = tmp_path / "dask.html"
    assert cli("report", job, "-o", reference, "--in-process").exit_code == 0
    done = cli("report", job, "-o", on_dask, "--workers", "2")
    assert done.exit_code == 0, done.stderr
    text = _report_text(on_dask)
    assert text == _report_text(reference)
    titles = {t for t in text if t.startswith(("process with no op (pid", "rank "))}  # contents and headings
    assert len(titles) == 4  # every process by its role, the two that recorded nothing with their reason
    assert text.count("Not analysed") == 2
    assert "<svg" in on_dask.read_text()  # the workers' plots came back inlined
    _opens_on_the_ranks_findings(on_dask)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["dask.html", "in-process.html"]  # no scratch left


def _opens_on_the_ranks_findings(page: Path) -> None:
    """The page's first section ranks the findings of every process, each naming its process and
    linking to a block of the page."""
    from lxml import html

    doc = html.parse(str(page)).getroot()
    body = [child for child in doc.find("body") if isinstance(child.tag, str)]
    assert [child.tag for child in body[:2]] == ["h1", "section"] and body[1].get("id") == "findings"
    items = list(body[1].iter("li"))
    stakes = [float(li.find("span").text.split()[0].replace(",", "")) for li in items if "at stake" in li.text_content()]
    assert stakes and stakes == sorted(stakes, reverse=True)
    where = {li.find("a[@class='analysis']").tail.split(":")[0].strip() for li in items}
    assert len(where) >= 2 and all(w.startswith("of rank ") for w in where)  # both ranks, by their role
    ids = {element.get("id") for element in doc.iter() if element.get("id")}
    assert all(li.find("a[@class='analysis']").get("href").removeprefix("#") in ids for li in items)
    assert body[1].findall(".//img[@class='evidence']")  # the workers' plots came back as evidence too


def test_the_cross_rank_analysis_reads_each_process_on_the_cluster(job: Path, cli: Any) -> None:
    reference = cli("ranks", job, "--in-process", "--format", "json")
    on_dask = cli("ranks", job, "--workers", "2", "--format", "json")
    assert reference.exit_code == on_dask.exit_code == 0, on_dask.stderr
    document = json.loads(on_dask.stdout)
    assert document == json.loads(reference.stdout)
    assert len(document["result"]["collectives"]) > 0  # joined across the ranks read by the workers


def _kineto_file(path: Path, rank: int, start_us: int) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 10 + rank, "tid": 1, "ts": start_us + 10 * i, "dur": 5,
               "args": {"External id": i + 1}} for i, name in enumerate(["aten::mm", "aten::add", "aten::relu"])]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2}}))
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_ranks_kineto_files_are_imported_as_tasks(tmp_path: Path, cli: Any) -> None:
    files = [_kineto_file(tmp_path / f"rank{r}.json", r, 1_694_039_968_933_321 + r) for r in range(2)]
    here = cli("import-kineto", *files, "-o", tmp_path / "here", "--in-process", "--format", "json")
    on_dask = cli("import-kineto", *files, "-o", tmp_path / "dask", "--workers", "2", "--format", "json")
    assert here.exit_code == on_dask.exit_code == 0, on_dask.stderr
    assert _tree(tmp_path / "here") == _tree(tmp_path / "dask") and len(_tree(tmp_path / "dask")) > 4
    ours = json.loads(on_dask.stdout)["traces"]
    assert [Path(t["output"]).name for t in ours] == ["rank0", "rank1"]
    (tmp_path / "rank1.json").write_text('{"traceEvents": [')  # cut short
    broken = cli("import-kineto", *files, "-o", tmp_path / "broken", "--workers", "2")
    assert broken.exit_code == 1 and "rank1.json" in broken.stderr and broken.stderr.count("\n") == 1


def test_the_job_s_top_nodes_add_every_op_of_every_rank_not_only_each_rank_s_top(job: Path, cli: Any) -> None:
    """With --top 1 each rank shows one op, yet the job's rows are the ranks' whole figures added."""
    merged = _analysis(cli, job, "--in-process", "--no-sections", "--top", "3")["top_nodes"]
    totals: dict[str, list[int]] = {}
    for trace in sorted(p for p in job.iterdir() if (p / "metadata").is_file()):
        one = cli("analyze", trace, "--no-sections", "--top", "1000", "--format", "json")
        for row in json.loads(one.stdout).get("top_nodes", []) if one.exit_code == 0 else []:
            into = totals.setdefault(row["op"], [0, 0])
            into[0] += row["count"]
            into[1] += row["total_ns"]
    expected = sorted(totals.items(), key=lambda kv: (-kv[1][1], kv[0]))[:3]
    assert [(r["op"], [r["count"], r["total_ns"]]) for r in merged] == expected
    one_rank = _analysis(cli, job, "--in-process", "--no-sections", "--top", "1")
    assert all(len(r["analysis"]["top_nodes"]) <= 1 for r in one_rank["ranks"] if "analysis" in r)


DIES_ONCE = """
import os, pathlib
marker = pathlib.Path(os.environ["DFCOMPASS_TEST_MARKER"])
if not marker.exists():  # the first worker to start dies (as the OOM killer would kill it); the rest live
    marker.touch()
    os._exit(3)
"""


@pytest.mark.parametrize("always", [False, True])
def test_a_worker_that_dies_as_the_cluster_starts(job: Path, tmp_path: Path, always: bool) -> None:
    """Dask's "Nanny failed to start": started again once; when it fails again, one line that says
    what to do, exit 1 (was an internal error)."""
    preload = tmp_path / "die.py"
    preload.write_text("import os\\nos._exit(3)\\n" if always else DIES_ONCE)
    env = {**subprocess_env(), "DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(preload)]),
           "DFCOMPASS_TEST_MARKER": str(tmp_path / "died")}
    done = subprocess.run([sys.executable, "-m", "tc_analyses.cli", "analyze", str(job), "--no-sections", "--workers", "2"],
                          capture_output=True, text=True, env=env, timeout=300)
    if always:
        assert done.returncode == 1, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "the local Dask cluster of 2 workers did not start, 2 times (Nanny failed to start" in line, line
        assert "--in-process" in line
    else:
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "died").exists() and "Traceback" not in done.stderr
