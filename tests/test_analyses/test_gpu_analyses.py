"""Windows and the HTA-style GPU analyses on small hand-made traces (each number computed by hand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses import bandwidth, kernels, launches, queues, sequences
from tc_analyses.errors import ConfigurationError
from tc_analyses.inputs import TraceInputs
from tc_analyses.model.window import Window, parse_window, StepWindow, TimeWindow
from tc_analyses.registry import entry
from tracer.builder import TraceBuilder

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def _launch(b: TraceBuilder, corr: int, start: int, end: int, name: str = "cudaLaunchKernel") -> None:
    b.add("api_enter", "1", start, 1, name, corr)
    b.add("api_exit", "1", end, 1, name, corr)


def _kernel(b: TraceBuilder, dev: int, queue: int, corr: int, name: str, start: int, end: int) -> None:
    b.add("kernel_begin", f"g{queue}", start, dev, queue, corr, name, 1, 1, 1, 1, 1, 1)
    b.add("kernel_end", f"g{queue}", end, dev, queue, corr)


def _trace(tmp_path: Path) -> Path:
    """Three steps of 10 µs on thread 1, each: op 'aten::mm' [s+0, s+5000) launching gemm, relu, add on
    queue 7; step 2 also launches an NCCL kernel on queue 9 and a 1 MiB HtoD copy; a memset launch
    that launched nothing (no memset event) in step 1; an annotation 'forward' over step 2's op.

    Times (ns), step s at 10000*s (s = 0, 1, 2):
      launches at s+100 (gemm), s+300 (relu), s+500 (add), each 100 ns long;
      gemm [s+1000, s+3000), relu [s+3000, s+3500), add [s+3600, s+3700) on queue 7.
      step 1: nccl launched at 10700-10800 runs [12000, 16000) on queue 9 (overlaps gemm 1000 ns, relu 500, add 100);
              copy launched at 10900-11000 runs [17000, 18000) on queue 7, 1 MiB (1.048576 GB/s... 1048576 B / 1000 ns).
    """
    out = tmp_path / "gpu"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=0)
        g = b.device("cuda:0", ts=0)
        corr = 0
        for step in range(3):
            s = 10_000 * step
            b.add("step_begin", "1", s, step, 1)
            b.add("node_begin", "1", s + 50, 100 + step, "aten::mm", "mm", cpu, 1, step)
            for name, launch, (start, end) in (("gemm", 100, (1000, 3000)), ("relu", 300, (3000, 3500)),
                                               ("add", 500, (3600, 3700))):
                corr += 1
                _launch(b, corr, s + launch, s + launch + 100)
                _kernel(b, g, 7, corr, name, s + start, s + end)
            if step == 0:
                _launch(b, 999, s + 4000, s + 4100, "cudaMemsetAsync")  # launched nothing
            if step == 1:
                b.add("annotation_begin", "1", s + 40, cpu, 1, 1, "forward")
                _launch(b, 500, s + 700, s + 800, "ncclKernelLaunch")
                _kernel(b, g, 9, 500, NCCL, s + 2000, s + 6000)
                _launch(b, 501, s + 900, s + 1000, "cudaMemcpyAsync")
                b.add("memcpy_begin", "g7", s + 7000, g, 7, 501, 1 << 20, "HtoD pinned", cpu, g)
                b.add("memcpy_end", "g7", s + 8000, g, 7, 501)
            b.add("node_end", "1", s + 5000, 100 + step, cpu, 1)
            if step == 1:
                b.add("annotation_end", "1", s + 5100, cpu, 1, 1)
            b.add("step_end", "1", s + 9999, step, 1)
    return out


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _trace(tmp_path_factory.mktemp("gpu"))


def _run(key: str, path: Path, window: Window | None = None, **options: Any) -> Any:
    return entry(key).run(TraceInputs(path, window=window), options).data


def test_window_specs_parse() -> None:
    assert parse_window("ProfilerStep#12") == StepWindow(12, 12)
    assert parse_window("step 2-4") == StepWindow(2, 4)
    assert parse_window("1.5ms:2s") == TimeWindow(1_500_000, 2_000_000_000)
    for bad in ("4-2", "5ms:1ms", "forward", "1x:2y"):
        with pytest.raises(ConfigurationError):
            parse_window(bad)


def test_the_last_step_is_left_out_everywhere_unless_asked(trace: Path) -> None:
    default = TraceInputs(trace)
    assert default.scope.cut_last_step and default.scope.steps == (0, 1)
    assert {n.step for n in default.activity.nodes} == {0, 1}
    assert len(default.activity.gpu) == 6 + 2  # steps 0 and 1: 3 kernels each, the NCCL kernel and the copy
    whole = TraceInputs(trace, window=Window(include_last_step=True))
    assert not whole.scope.cut_last_step and len(whole.activity.gpu) == 11
    # Both GPU analyses and the graph read the same window.
    assert max(x.call_start_ns for x in _run("launches", trace).launches) == 10_900  # step 1's copy
    assert all(a["executions"] == 2 for _, a in default.graph.nodes(data=True))


def test_step_time_and_annotation_windows(trace: Path) -> None:
    step1 = TraceInputs(trace, window=Window("1"))
    assert {n.step for n in step1.activity.nodes} == {1} and not step1.scope.cut_last_step
    assert len(step1.activity.gpu) == 5
    # 2 (the last step) is allowed when named.
    assert {n.step for n in TraceInputs(trace, window=Window("ProfilerStep#2")).activity.nodes} == {2}
    # A time range from the trace's first event (0): 20 µs on is step 2 only.
    assert {n.step for n in TraceInputs(trace, window=Window("20us:30us")).activity.nodes} == {2}
    forward = TraceInputs(trace, window=Window(annotation="forw*"))
    assert [n.step for n in forward.activity.nodes] == [1]
    with pytest.raises(ConfigurationError, match="no user annotation 'backward'.*forward"):
        _ = TraceInputs(trace, window=Window(annotation="backward")).activity
    with pytest.raises(ConfigurationError, match="no step 7"):
        _ = TraceInputs(trace, window=Window("7")).activity
    with pytest.raises(ConfigurationError, match="starts after the trace ends"):
        _ = TraceInputs(trace, window=Window("1s:2s")).activity


def test_kernel_breakdown_by_type_name_and_overlap(trace: Path) -> None:
    data = _run("kernels", trace, Window("1"), top=10, duration_ratio=0.8)
    rows = {t.label: t.time_ns for t in data.types}
    # compute [11000,13000)+[13000,13500)+[13600,13700) = 2600; nccl [12000,16000) overlaps 1600 of it.
    assert rows == {"compute": 1000, "communication": 2400, "compute overlapping communication": 1600, "memory": 1000}
    assert data.comm_comp_overlap_pct == pytest.approx(100 * 1600 / 4000)
    names = {(k.type, k.name): k for k in data.kernels}
    assert names[("compute", "gemm")].total_ns == 2000 and names[("memory", "Memcpy HtoD pinned")].count == 1
    folded = kernels.per_name(TraceInputs(trace, window=Window(include_last_step=True)).activity.gpu, 1, 0.8)
    compute = [k for k in folded if k.type == "compute"]
    assert [(k.name, k.count, k.total_ns) for k in compute] == [("gemm", 3, 6000), ("others", 6, 1800)]


def test_launch_delays_and_short_kernels(trace: Path) -> None:
    data = _run("launches", trace, Window(include_last_step=True), runtime_cutoff_us=50.0,
                launch_delay_cutoff_us=1.0, kernels_only=False)
    # Per step: gemm launched 100-200 starts 1000 (delay 800), relu 300-400 -> 3000 (2600), add 500-600 -> 3600 (3000).
    gemm = [x for x in data.launches if x.kernel == "gemm"]
    assert [x.delay_ns for x in gemm] == [800, 800, 800] and all(x.cpu_ns == 100 for x in gemm)
    # The NCCL launch is not a launch call HTA counts; the copy is (cudaMemcpyAsync), delay 6000.
    copy = next(x for x in data.launches if x.correlation_id == 501)
    assert len(data.launches) == 10 and copy.delay_ns == 6000 and copy.kernel == "Memcpy HtoD pinned"
    assert data.short == 0 and data.delay_outliers == 10 - 3  # delays 800 are under 1 µs
    assert data.delay_percentiles_ns["max"] == 6000
    only = _run("launches", trace, Window(include_last_step=True), runtime_cutoff_us=50.0,
                launch_delay_cutoff_us=100.0, kernels_only=True)
    assert len(only.launches) == 9


def test_queue_length_ignores_launches_that_launched_nothing(trace: Path) -> None:
    data = _run("queues", trace, Window(include_last_step=True), max_queue_length=2)
    q7 = next(q for q in data.series if q.queue == 7)
    # The memset launch of step 0 launched nothing: the queue still ends at 0.
    assert q7.lengths[-1] == 0 and min(q7.lengths) == 0
    summary = next(q for q in data.queues if q.queue == 7)
    # Steps 0 and 2: 3 launches (100, 300, 500) queue up before the gemm starts (1000); 2 or more from
    # the second launch (300) until relu starts (3000). Step 1 also launches the copy (10900) before the
    # gemm starts: 4 deep, 2 or more from 10300 until add starts (13600).
    assert summary.max == 4 and summary.launches == 10
    assert summary.blocked_ns == 2 * (3000 - 300) + (13600 - 10300)


def test_bandwidth_per_copy_kind(trace: Path) -> None:
    data = _run("bandwidth", trace, Window(include_last_step=True))
    [row] = data.kinds
    assert (row.kind, row.host_memory, row.count, row.bytes, row.busy_ns) == ("HtoD", "pinned", 1, 1 << 20, 1000)
    assert row.achieved_gbps == pytest.approx((1 << 20) / 1000) == row.peak_concurrent_gbps
    assert bandwidth.concurrent_series(list(TraceInputs(trace).activity.gpu)[:0]) == []


def test_frequent_sequences(trace: Path) -> None:
    data = _run("sequences", trace, Window(include_last_step=True), operator="", min_length=3, top=5)
    assert [(p.root, p.kernels, p.count) for p in data.patterns] == [
        ("mm", ("gemm", "relu", "add"), 2), ("mm", ("gemm", NCCL, "relu", "add", "Memcpy HtoD pinned"), 1)]
    assert data.patterns[0].gpu_ns == 2 * 2600 and data.patterns[0].cpu_ns == 2 * 4950
    assert data.findings and data.findings[0].kind == "fusion_candidate"
    roots, found = sequences.frequent_sequences(TraceInputs(trace).activity, "forward", 3)
    assert roots == 1 and found[0].root == "forward"  # the annotation is the shallowest match


def test_analyses_without_gpu_work_say_so(tmp_path: Path) -> None:
    out = tmp_path / "cpu"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=0)
        b.add("node_begin", "1", 10, 1, "aten::mm", "mm", cpu, 1, 0)
        b.add("node_end", "1", 20, 1, cpu, 1)
    for key in ("kernels", "launches", "queues", "bandwidth", "sequences"):
        with pytest.raises(Exception, match=str(out)):
            entry(key).run(TraceInputs(out), entry(key).options())


def test_reports_render(trace: Path, tmp_path: Path) -> None:
    for key in ("kernels", "launches", "queues", "bandwidth", "sequences"):
        analysis = entry(key)
        result = analysis.run(TraceInputs(trace, window=Window(include_last_step=True)), analysis.options())
        text = analysis.text(result)
        assert "scope:" in text and "findings:" in text
        written = analysis.artifacts(result, tmp_path / key)
        assert {p.suffix for p in written} >= {".png", ".svg"}
    assert queues.CUDA_MAX_LAUNCH_QUEUE == 1024 and launches.KERNEL_LAUNCHES


def test_trace_diff_counts_and_times(trace: Path, tmp_path: Path, cli: Any) -> None:
    import json

    from tc_analyses.analyses import trace_diff

    whole = Window(include_last_step=True)
    same = trace_diff.run(TraceInputs(trace, window=whole), TraceInputs(trace, window=whole))
    assert all(r.count_change == 0 and r.time_change_ns == 0 for r in same.data.rows)
    # Step 1 against step 0: the NCCL kernel and the copy appear, gemm is the same.
    rows = {(r.side, r.name): r for r in trace_diff.compare(TraceInputs(trace, window=Window("0")).activity,
                                                             TraceInputs(trace, window=Window("1")).activity)}
    assert (rows[("gpu", NCCL)].control_count, rows[("gpu", NCCL)].test_ns) == (0, 4000)
    assert rows[("gpu", "gemm")].time_change_ns == 0 and rows[("cpu", "cudaMemsetAsync")].test_count == 0
    assert rows[("cpu", "ProfilerStep#0")].control_count == 1
    done = cli("diff", str(trace), str(trace), "--window", "0", "--format", "json", "-o", str(tmp_path / "d"))
    data = json.loads(done.stdout)
    assert data["analysis"] == "diff" and data["result"]["rows"] and (tmp_path / "d" / "diff.svg").is_file()


def _sync_trace(tmp_path: Path) -> Path:
    """Thread 1: op A [0,100) launches K (call [10,20)); K runs [50,1000) on queue 7; the host then waits in
    cudaStreamSynchronize [100,1010) (its GPU sync event [110,1005) on queue 7); op B [1010,1100)."""
    out = tmp_path / "sync"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, g = b.device("cpu", ts=0), b.device("cuda:0", ts=0)
        b.add("node_begin", "1", 0, 1, "aten::mm", "A", cpu, 1, 0)
        _launch(b, 5, 10, 20)
        b.add("node_end", "1", 100, 1, cpu, 1)
        _kernel(b, g, 7, 5, "gemm", 50, 1000)
        _launch(b, 6, 100, 1010, "cudaStreamSynchronize")
        b.add("sync_begin", "g7", 110, g, 7, 6, "Stream Sync", 4294967295, 0)
        b.add("sync_end", "g7", 1005, g, 7, 6)
        b.add("node_begin", "1", 1010, 2, "aten::relu", "B", cpu, 1, 0)
        b.add("node_end", "1", 1100, 2, cpu, 1)
    return out


def test_critical_path_crosses_to_the_gpu_through_a_sync(tmp_path: Path) -> None:
    data = _run("critical-path", _sync_trace(tmp_path), top=5)
    path = [(s.bound, s.name, s.start, s.end) for s in data.segments]
    assert path == [("cpu_bound", "aten::mm", 0, 10), ("cpu_bound", "cudaLaunchKernel", 10, 20),
                    ("gpu_kernel_launch_overhead", "gap", 20, 50), ("gpu_compute_bound", "gemm", 50, 1000),
                    ("cpu_bound", "cudaStreamSynchronize", 1000, 1010), ("cpu_bound", "aten::relu", 1010, 1100)]
    assert sum(data.bound_ns.values()) == data.length_ns == 1100
    assert data.findings[0].text.startswith("86% of the critical path")  # 950 of 1100 ns: the kernel


def test_critical_path_stays_on_the_cpu_when_the_gpu_was_done(trace: Path) -> None:
    # No synchronisation: the last op's end is set by the host alone.
    data = _run("critical-path", trace, Window("1"), top=5)
    # (the copy starts 1 µs after the NCCL kernel of queue 9 ends: read as a wait for it)
    assert {s.bound for s in data.segments} <= {"cpu_bound", "cpu_idle", "gpu_compute_bound", "gpu_memory_bound",
                                                "gpu_kernel_launch_overhead", "gpu_kernel_kernel_overhead",
                                                "gpu_other_queue"}
    assert sum(data.bound_ns.values()) == data.length_ns


@pytest.mark.parametrize("launch", ["hipLaunchKernel", "hipModuleLaunchKernel", "cuLaunchKernel",
                                    "cudaLaunchCooperativeKernel"])
def test_launches_of_every_vendor_and_api_are_paired(tmp_path: Path, launch: str) -> None:
    """A ROCm trace's hipLaunchKernel (HTA 0.6.1 knows CUDA's names only: no rows there, and our
    launches exited 1), the driver API's cuLaunchKernel (Triton, torch.compile): paired with their
    kernels like cudaLaunchKernel, in `launches` and in `queues`."""
    out = tmp_path / "vendor"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        g = b.device("cuda:0", ts=0)
        for k in range(3):
            _launch(b, k + 1, 1000 * k, 1000 * k + 200, launch)
            _kernel(b, g, 3, k + 1, "k", 1000 * k + 500, 1000 * k + 900)
    data = _run("launches", out, Window(include_last_step=True), runtime_cutoff_us=50.0,
                launch_delay_cutoff_us=100.0, kernels_only=True)
    assert [(x.cpu_ns, x.delay_ns, x.gpu_ns) for x in data.launches] == [(200, 300, 400)] * 3
    depth = _run("queues", out, Window(include_last_step=True), max_queue_length=2)
    assert next(q for q in depth.queues if q.queue == 3).launches == 3


def _allreduce_step(out: Path, unlaunched: int) -> Path:
    """Two steps; step 0 launches three AllReduce kernels, and `unlaunched` more run in it whose
    launch calls were not recorded (a collective's kernels often have none in a Kineto file)."""
    with TraceBuilder(out, clock_offset_ns=0) as b:
        g = b.device("cuda:0", ts=0)
        for step in range(2):
            b.add("step_begin", "1", 10_000 * step, step, 1)
            for k in range(3):
                corr = 100 * step + k + 1
                _launch(b, corr, 10_000 * step + 100 * k, 10_000 * step + 100 * k + 50)
                _kernel(b, g, 9, corr, NCCL, 10_000 * step + 1000 * k + 500, 10_000 * step + 1000 * k + 900)
            if step == 0:
                for k in range(unlaunched):
                    _kernel(b, g, 9, 900 + k, NCCL, 5000 + 1000 * k, 5000 + 1000 * k + 400)
            b.add("step_end", "1", 10_000 * step + 9_999, step, 1)
    return out


def test_trace_diff_leaves_out_gpu_work_without_a_launch_as_hta(tmp_path: Path, cli: Any) -> None:
    """GPU work with no recorded launch is left out of the diff (HTA assigns GPU work to an
    iteration through its launch and drops the rest), and counted: the same three launched
    all-reduces on each side are no change, where counting the test's three unlaunched ones by
    their start in the step made "3 -> 6 runs"."""
    from tc_analyses.analyses import trace_diff

    control, test = _allreduce_step(tmp_path / "control", 0), _allreduce_step(tmp_path / "test", 3)
    step0 = Window("0", include_last_step=True)
    result = trace_diff.run(TraceInputs(control, window=step0), TraceInputs(test, window=step0)).data
    row = next(r for r in result.rows if r.side == "gpu")
    assert (row.control_count, row.test_count, row.time_change_ns) == (3, 3, 0)
    assert (result.control_unlaunched, result.test_unlaunched) == (0, 3)
    assert not any(f.kind == "gpu_time_change" for f in result.findings)
    done = cli("diff", str(control), str(test), "--window", "0", "--include-last-step")
    assert done.exit_code == 0, done.stderr
    assert "left out, no launch call recorded (as HTA): 0 GPU operations in the control, 3 in the test" in done.stdout


def _node(b: TraceBuilder, cpu: int, tid: int, node: int, start: int, end: int, op: str) -> None:
    b.add("node_begin", str(tid), start, node, op, op, cpu, tid, 0)
    b.add("node_end", str(tid), end, node, cpu, tid)


@pytest.mark.parametrize("resumes_after", [5_000, 45_000])
def test_a_thread_waiting_for_another_threads_work_is_not_idle(tmp_path: Path, resumes_after: int) -> None:
    """The main thread's gap before its next op is the autograd thread's work when it resumes right
    after that work ends (within RELEASE_NS): cpu_other_thread, named after the thread; when the
    other thread finished long before, the gap stays cpu_idle."""
    out = tmp_path / "threads"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, g = b.device("cpu", ts=0), b.device("cuda:0", ts=0)
        _node(b, cpu, 1, 1, 0, 10_000, "aten::forward_part")
        _node(b, cpu, 2, 2, 12_000, 100_000 - resumes_after, "autograd::engine::evaluate_function")
        _node(b, cpu, 1, 3, 100_000, 110_000, "aten::step")
        _launch(b, 7, 101_000, 102_000)
        _kernel(b, g, 7, 7, "k", 120_000, 130_000)
    data = _run("critical-path", out, Window(include_last_step=True), top=5)
    gap = next(s for s in data.segments if s.where == "thread 1" and s.start == 10_000)
    assert gap.end == 100_000
    waited = resumes_after <= 50_000
    assert (gap.bound, gap.name) == (("cpu_other_thread", "thread 2") if waited else ("cpu_idle", "idle"))
    assert sum(data.bound_ns.values()) == data.length_ns


@pytest.mark.parametrize("other_ends", [19_500, 5_000])
def test_a_queue_waiting_for_another_queue_is_not_kernel_overhead(tmp_path: Path, other_ends: int) -> None:
    """A kernel that starts right after a kernel of another queue of its device ends (no event
    recorded) waited for it: gpu_other_queue; a kernel of another queue that merely ran at the same
    time does not make the gap a wait (gpu_kernel_kernel_overhead)."""
    out = tmp_path / "queues"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        g = b.device("cuda:0", ts=0)
        for corr, (start, end) in enumerate(((0, 1_000), (20_000, 21_000)), start=1):
            _launch(b, corr, 10 * corr, 10 * corr + 5)
            _kernel(b, g, 7, corr, f"k{corr}", start, end)
        _launch(b, 3, 40, 45)
        _kernel(b, g, 9, 3, "other", 1_000, other_ends)
    data = _run("critical-path", out, Window(include_last_step=True), top=5)
    gap = next(s for s in data.segments if s.where == "cuda:0 queue 7" and s.start == 1_000)
    expected = ("gpu_other_queue", "cuda:0 queue 9") if other_ends == 19_500 else ("gpu_kernel_kernel_overhead", "gap")
    assert (gap.bound, gap.name, gap.end) == (*expected, 20_000)


def _ops(out: Path, names: list[str]) -> Path:
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu = b.device("cpu", ts=0)
        for k, name in enumerate(names):
            _node(b, cpu, 1, k + 1, 1000 * k, 1000 * k + 500, name)
    return out


@pytest.mark.parametrize("shared", [4, 1])
def test_trace_diff_says_when_the_traces_are_not_one_program(tmp_path: Path, shared: int) -> None:
    """Two runs of one program share most op names; two traces that share few are probably not
    comparable, and the diff says so first (issue 36: ranks and diff check their inputs)."""
    from tc_analyses.analyses import trace_diff

    common = ["aten::mm", "aten::add", "aten::relu", "aten::sum"]
    control = _ops(tmp_path / "control", common)
    test = _ops(tmp_path / "test", common[:shared] + [f"other::op{k}" for k in range(4 - shared)])
    whole = Window(include_last_step=True)
    findings = trace_diff.run(TraceInputs(control, window=whole), TraceInputs(test, window=whole)).findings
    flagged = [f for f in findings if f.kind == "not_comparable"]
    if shared == 4:
        assert flagged == []
    else:
        assert findings[0].kind == "not_comparable" and "share 1 of their 7 CPU op and call names" in findings[0].text


def test_a_nested_op_ending_on_a_busy_thread_releases_nothing(tmp_path: Path) -> None:
    """Thread 2 stays busy in X while its child Y ends: the end of Y is no end of thread 2's work,
    so thread 1's gap stays cpu_idle (a thread's busy time is its pieces merged)."""
    out = tmp_path / "nested"
    with TraceBuilder(out, clock_offset_ns=0) as b:
        cpu, g = b.device("cpu", ts=0), b.device("cuda:0", ts=0)
        _node(b, cpu, 1, 1, 0, 100_000, "aten::a")
        _node(b, cpu, 2, 2, 0, 1_000_000, "aten::x")
        _node(b, cpu, 2, 3, 100_000, 200_000, "aten::y")
        _node(b, cpu, 1, 4, 230_000, 2_000_000, "aten::b")
        _launch(b, 7, 1_900_000, 1_901_000)
        _kernel(b, g, 7, 7, "k", 2_100_000, 2_200_000)
    data = _run("critical-path", out, Window(include_last_step=True), top=5)
    gap = next(s for s in data.segments if s.where == "thread 1" and s.start == 100_000)
    assert (gap.bound, gap.end) == ("cpu_idle", 230_000)


def test_trace_diff_of_one_program_profiled_at_other_steps_is_comparable(tmp_path: Path) -> None:
    """Two runs of one program that profiled other step numbers share no ProfilerStep#N row: those
    rows do not count against their being one program."""
    from tc_analyses.analyses import trace_diff

    def run(out: Path, first_step: int) -> Path:
        with TraceBuilder(out, clock_offset_ns=0) as b:
            cpu = b.device("cpu", ts=0)
            for k in range(8):
                b.add("step_begin", "1", 10_000 * k, first_step + k, 1)
                for j, name in enumerate(("aten::mm", "aten::add", "aten::relu")):
                    _node(b, cpu, 1, 10 * k + j + 1, 10_000 * k + 1000 * j, 10_000 * k + 1000 * j + 500, name)
                b.add("step_end", "1", 10_000 * k + 9_000, first_step + k, 1)
        return out

    whole = Window(include_last_step=True)
    result = trace_diff.run(TraceInputs(run(tmp_path / "a", 0), window=whole),
                            TraceInputs(run(tmp_path / "b", 8), window=whole))
    assert not any(f.kind == "not_comparable" for f in result.findings)
