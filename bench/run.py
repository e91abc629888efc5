"""dfcompass benchmarks (``make bench``): recorder cost, read speed, PyTorch overhead, as side-by-side ratios.

Usage: ``.venv/bin/python bench/run.py [--only recorder|read|ctf|torch|job|engine|seed|placement|startup|verify|kernels|gpu|hta|kineto|scale|dask|tf|realworld|pace] [--big] [--nodes N] [--rounds K] [--examples DIR]``

Writes bench/out/results.json and prints a table. Exit status 0 even when a target is missed
(the table says MISSED); non-zero only when a benchmark could not run or its checks failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling bench modules

import analysis_pace  # noqa: E402
import ctf_speed  # noqa: E402
import dask_scale  # noqa: E402
import engine_scale  # noqa: E402
import engine_speed  # noqa: E402
import gpu_prediction  # noqa: E402
import hta_speed  # noqa: E402
import job_overhead  # noqa: E402
import kernel_model  # noqa: E402
import kineto_scale  # noqa: E402
import placement_bench  # noqa: E402
import realworld  # noqa: E402
import read_speed  # noqa: E402
import recorder_cost  # noqa: E402
import seed_speed  # noqa: E402
import startup  # noqa: E402
import tf_overhead  # noqa: E402
import torch_overhead  # noqa: E402
import verify_bench  # noqa: E402
from _common import OUT_DIR, Row, print_report, verdict, versions, write_json  # noqa: E402


def _ns(value: float) -> str:
    return f"{value:,.0f} ns"


def _x(value: float) -> str:
    return f"{value:.2f}x"


def realworld_rows(r: dict[str, Any]) -> list[Row]:
    """One row per program: the worst command against the traced run, and the edges."""
    rows: list[Row] = []
    for p in r["programs"]:
        if p["status"] != "ok":
            rows.append((p["name"], "not run", p["status"]))
            continue
        worst = max(p["commands"].items(), key=lambda kv: kv[1]["ratio"], default=None)
        edges = (f"edges precision {p['precision']:.3f}, recall {p['recall']:.3f}" if p["precision"] is not None
                 and p["recall"] is not None else "edges not checked")
        if worst is None:
            rows.append((p["name"], "recorded", edges))
            continue
        name, c = worst
        rows.append((p["name"], _x(c["ratio"]), f"worst command {name} (target <= {r['bound']:.0f}x: "
                     f"{verdict(c['ratio'] <= r['bound'] and c['rc'] == 0)}); traced/untraced "
                     f"{_x(p['traced_s'] / p['untraced_s'])}; {p['nodes']:,} nodes; {edges}"))
    rows.append(("table", "", "bench/out/realworld/results.json; bench/realworld.py prints every command"))
    return rows


def tf_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for name, w in r["workloads"].items():
        s = w["seconds"]
        ops = w["graph_ops_traced"]
        rows.append((f"{name}: ours / TF profiler, every op", _x(w["ratio"]),
                     f"target <= {r['target_ratio']:.1f}x: {verdict(w['pass'])}; ours {_x(w['slowdown_ours'])}, "
                     f"profiler every op {_x(w['slowdown_profiler_every_op'])}, as started "
                     f"{_x(w['slowdown_profiler'])} of untraced ({s['untraced'] * 1e3:.0f} ms); against the profiler "
                     f"as started {_x(w['ratio_plain_profiler'])} (it traced {ops['profiler']:,} graph ops, every op: "
                     f"{ops['profiler, every op']:,}); "
                     f"{w['nodes']} nodes, {w['edges']} edges; {w['windows']} windows, {w['handed_off']} to fork "
                     f"children; converting here {_x(w['ratio_converting_here'])}; cost line "
                     f"{w['cost_line_share_own']:.0%} of what ours adds to the profiler, every op "
                     f"({w['cost_line_share']:.0%} of ours - untraced)"))
    rows.append(("tensorflow", r["tensorflow"], "TF runs in a child process"))
    return rows


def recorder_rows(r: dict[str, Any]) -> list[Row]:
    c, ratios = r["cases"], r["ratios"]
    target = r["target_ns_per_event"]
    rows: list[Row] = [
        ("tracer.node, per event (flush incl.)", _ns(r["headline_ns_per_event"]), f"target <= {target:,.0f} ns"),
        ("  verdict", verdict(r["pass"]), ""),
        ("tracer.node, per node", _ns(c["node on"]["ns_per_node"]), "2 events: node_begin + node_end"),
        ("session.node_begin/end, per event", _ns(c["low-level"]["ns_per_event"]),
         verdict(r["pass_by_case"]["low-level"]) + " (instrumented-runtime path)"),
        ("node + tensor edge, per event", _ns(c["edge on"]["ns_per_event"]),
         verdict(r["pass_by_case"]["edge on"]) + f"; {_ns(c['edge on']['ns_per_node'])} per node, 3 events"),
        ("tracing off: tracer.node, per node", _ns(c["node off"]["ns_per_node"]), "no session: the API is a no-op"),
        ("tracing off: node + edge, per node", _ns(c["edge off"]["ns_per_node"]), ""),
        ("floor: time.monotonic_ns(), per call", _ns(c["floor"]["ns_per_node"]), "loop included"),
        ("ratio node event / floor", _x(ratios["node_on_event_per_floor"]), ""),
        ("ratio low-level event / floor", _x(ratios["lowlevel_event_per_floor"]), ""),
        ("ratio edge event / floor", _x(ratios["edge_on_event_per_floor"]), ""),
        ("ratio node on / off, per node", _x(ratios["node_on_per_node_off"]), ""),
        ("ratio edge on / off, per node", _x(ratios["edge_on_per_edge_off"]), ""),
        ("added by tracing, per event", _ns(r["added_ns_per_event"]["node"]),
         f"node; edge variant: {_ns(r['added_ns_per_event']['edge'])}"),
    ]
    return rows


def job_rows(r: dict[str, Any]) -> list[Row]:
    loop, wall = r["loop_slowdown"], r["wall_slowdown"]
    return [
        ("loop slowdown: recorded / profiler", _x(r["ratio_recorded_per_profiler"]),
         f"{r['steps']} steps, slowest rank's loop, best of {r['rounds']}"),
        ("loop: torch.profiler in each rank", _x(loop["profiler"]), "vs untraced"),
        ("loop: dfcompass record (whole job)", _x(loop["recorded"]), "vs untraced"),
        ("job wall time: profiler / recorded", f"{_x(wall['profiler'])} / {_x(wall['recorded'])}",
         "vs untraced; start-up, import and the conversion at exit included"),
    ]


def read_rows(r: dict[str, Any]) -> list[Row]:
    c = r["cases"]
    bt, ours, proc = c["babeltrace2 dummy"], c["read_trace"], c["read_trace (new process)"]
    rows: list[Row] = [
        ("read_trace / babeltrace2 dummy", _x(r["ratio"]), f"target >= {r['target_ratio']:.0f}x"),
        ("  verdict", verdict(r["pass"]), ""),
        ("read_trace (in process, columns touched)", f"{ours['events_per_s'] / 1e6:.2f} M ev/s",
         f"best {ours['best_s']:.3f} s"),
        ("babeltrace2 --output-format=dummy", f"{bt['events_per_s'] / 1e6:.2f} M ev/s", f"best {bt['best_s']:.3f} s"),
        ("read_trace in a new process", f"{proc['events_per_s'] / 1e6:.2f} M ev/s",
         f"best {proc['best_s']:.3f} s; ratio {_x(r['ratio_new_process'])}"),
        ("trace", f"{r['events'] / 1e6:.0f}M events", f"{r['bytes'] / 1e6:.0f} MB, {r['trace']}"),
    ]
    small = r.get("bt2_python_100k", {})
    if "ratio" in small:
        bt2_speed = small["cases"]["bt2 python"]["events_per_s"]
        ours_small = small["cases"]["read_trace"]["events_per_s"]
        rows.append(("read_trace / bt2 Python (100k events)", _x(small["ratio"]),
                     f"bt2 {bt2_speed / 1e6:.2f} M ev/s, ours {ours_small / 1e6:.2f} M ev/s"))
    elif "skipped" in small:
        rows.append(("bt2 Python (100k events)", "skipped", small["skipped"]))
    return rows


def ctf_rows(r: dict[str, Any]) -> list[Row]:
    v = r["versions"]
    versions: list[Row] = [
        ("CTF 2 / CTF 1.8, numpy reader (time)", _x(v["ratio_fast_ctf2_to_18"]), "target <= 1.2x; same streams"),
        ("CTF 2 / CTF 1.8, iter_ctf (time)", _x(v["ratio_iter_ctf_ctf2_to_18"]), f"{v['events']:,} events")]
    if "skipped" in r:
        return versions + [("LTTng: skipped", "-", r["skipped"])]
    c = r["cases"]

    def speed(case: str) -> str:
        return f"{c[case]['events_per_s'] / 1e3:.0f} k ev/s, best {c[case]['best_s']:.2f} s"

    return versions + [
        ("iter_ctf / bt2 in process", _x(r["ratio_bt2_in_process"]), "both with fields, as records"),
        ("iter_ctf / babeltrace2 dummy", _x(r["ratio_babeltrace2_dummy"]), "the CLI decodes and discards"),
        ("iter_ctf", speed("iter_ctf"), ""),
        ("bt2 in process (bt2_source._read_in_process)", speed("bt2 in process"), ""),
        ("babeltrace2 --output-format=dummy", speed("babeltrace2 dummy"), ""),
        ("trace", f"{r['events']:,} events", r["trace"]),
    ]


def torch_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for name, m in r["models"].items():
        c, s, loop = m["cases"], m["slowdown"], m["loop_slowdown"]
        t = m["trace"]
        rows += [
            (f"{name}: ours / (profiler + export) slowdown", _x(m["ratio_ours_per_profiler_export"]),
             f"target <= {r['target_ratio']:.1f}x; ours / profiler without export {_x(m['ratio_ours_per_profiler'])}, "
             f"loop only {_x(m['loop_ratio_ours_per_profiler'])}"),
            ("  verdict", verdict(m["pass"]), ""),
            ("  untraced", f"{c['untraced']['ms_per_step']:.2f} ms/step", f"{m['steps']} steps, batch {r['batch']}, 1 thread"),
            ("  torch.profiler slowdown", _x(s["profiler"]),
             f"loop only {_x(loop['profiler'])}; stop {c['profiler']['stop_s_of_best'] * 1e3:,.0f} ms"),
            ("  TorchRecorder slowdown", _x(s["ours"]),
             f"loop only {_x(loop['ours'])}; stop + conversion {c['ours']['stop_s_of_best'] * 1e3:,.0f} ms"),
            ("  TorchRecorder, converting on the program's thread", _x(s["ours, converting here"]),
             f"DFCOMPASS_HANDOFF=0; ours / (profiler + export) "
             f"{_x(s['ours, converting here'] / s['profiler+export'])}"),
            ("  TorchRecorder, profiler engine", _x(s["ours, profiler engine"]),
             f"engine='profiler'; loop only {_x(loop['ours, profiler engine'])}; it / (profiler + export) "
             f"{_x(s['ours, profiler engine'] / s['profiler+export'])} (converting on the program's thread: "
             f"{_x(s['ours, profiler engine converting here'] / s['profiler+export'])})"),
            ("  torch.profiler + export_chrome_trace", _x(s["profiler+export"]),
             f"context; ours / it {_x(m['ratio_ours_per_profiler_export'])}; "
             f"JSON {c['profiler+export']['json_bytes'] / 1e6:.1f} MB"),
            ("  recorder's own cost line", f"{m['own_cost_s'] * 1e3:,.0f} ms",  # with the estimate inside the ops
             f"measured overhead {m['measured_overhead_s'] * 1e3:,.0f} ms (one round: "
             f"{m['measured_overhead_rounds_s'][0] * 1e3:,.0f} to {m['measured_overhead_rounds_s'][1] * 1e3:,.0f} ms); "
             + (f"the line says {m['own_cost_per_measured']:.0%} of it, "
                f"{m['own_cost_high_per_measured']:.0%} with the window thread's CPU "
                f"({m['beside_cpu_s'] * 1e3:,.0f} ms)" if m["own_cost_per_measured"] else "no overhead measured")),
            ("  our trace", f"{m['bytes_per_event']:.1f} B/event",
             f"{t['events_per_step']:.0f} events/step, {t['nodes_per_step']:.0f} ops/step, "
             f"{t['tensor_edges']:,} tensor edges, {t['stream_bytes'] / 1e6:.2f} MB"),
        ]
    rows += [
        ("bytes per event, all our traces", f"{r['bytes_per_event']:.2f} B",
         f"target <= {r['target_bytes_per_event']:.0f} B; stream files, metadata excluded"),
        ("  verdict", verdict(r["pass_bytes"]), ""),
    ]
    return rows


def engine_rows(r: dict[str, Any]) -> list[Row]:
    c = r["cases"]
    bt, ours = c["babeltrace2 dummy"], c["engine"]
    return [
        ("engine / babeltrace2 dummy", _x(r["ratio"]), f"target >= {r['target_ratio']:.1f}x"),
        ("  verdict", verdict(r["pass"]), ""),
        ("engine: all generated analyses", f"{ours['events_per_s'] / 1e3:.0f} k ev/s",
         f"best {ours['best_s']:.2f} s; {r['per_event_us']:.1f} us/event for {ours['analyses']} state systems; "
         f"{ours['intervals']:,} intervals, {ours['segments']:,} segments"),
        ("  on columns", f"{len(ours['on_columns'])} of {ours['analyses']}", ", ".join(ours["on_columns"])),
        ("event-by-event engine (reference)", f"{c['event by event']['events_per_s'] / 1e3:.0f} k ev/s",
         f"best {c['event by event']['best_s']:.2f} s; the engine is {r['speedup_over_event_by_event']:.1f}x faster, "
         "same intervals and segments"),
        ("babeltrace2 --output-format=dummy", f"{bt['events_per_s'] / 1e6:.2f} M ev/s", f"best {bt['best_s']:.3f} s"),
        ("trace", f"{r['events']:,} events", ", ".join(r["analyses"])),
    ]


def scale_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for row in r["rows"]:
        rows.append((f"{row['events']:,} events ({row['trace_mb']:.0f} MB)", f"{row['analyze_s']:.1f} s",
                     f"{row['analyze_events_per_s'] / 1e3:.0f} k ev/s = {row['ratio_to_babeltrace2']:.3f}x babeltrace2 "
                     f"({row['babeltrace2_s']:.2f} s); peak {row['analyze_rss_mib']:.0f} MiB = "
                     f"{row['rss_per_trace_size']:.0f}x the trace"))
        if "event_by_event_s" in row:
            rows.append(("  event-by-event engine", f"{row['event_by_event_s']:.1f} s",
                         f"{row['speedup']:.1f}x slower than analyze's engine; peak {row['event_by_event_rss_mib']:.0f} MiB"))
        if "time_growth" in row:
            rows.append(("  growth from the size before", f"x{row['size_growth']:.0f} events",
                         f"time x{row['time_growth']:.1f}, peak RSS x{row['rss_growth']:.1f}"))
    return rows


def dask_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for row in r["rows"]:
        detail = f"busiest worker {row['peak_worker_rss_mib']} MiB"
        if "speedup_from_1_worker" in row:
            detail += f"; speedup from 1 worker {_x(row['speedup_from_1_worker'])}"
        rows.append((f"{row['ranks']:>2} ranks x 1M events, {row['workers']} worker(s)", f"{row['seconds']:.1f} s", detail))
    m = r["model"]
    errors = ", ".join(f"{h['ranks']}: {h['error'] * 100:+.0f}%" for h in m["held_out"])
    rows.append(("model T = start-up + ceil(N/W) x t_trace", f"{m['startup_s']:.1f} s + {m['per_trace_s']:.1f} s",
                 f"fitted on 1 worker; error on the 2-worker runs by N: {errors}"))
    for workers, p in m["beyond_the_cores"].items():
        rows.append((f"  predicted, 16 ranks on {workers} workers", f"{p['seconds_16_ranks']:.1f} s",
                     f"speedup {_x(p['speedup_16_ranks'])} over 1 worker, given {workers} cores ({r['cores']} here)"))
    hta = r.get("hta", {})
    if "skipped" in hta:
        rows.append(("against HTA", "skipped", hta["skipped"]))
    for h in hta.get("rows", []):
        rows.append((f"{h['ranks']} Kineto rank(s) x 1M: dfcompass / HTA time", _x(h["time_ratio"]),
                     f"{h['dfcompass_s']:.1f} s (import {h['import_s']:.1f} s + analyze on 2 workers "
                     f"{h['analyze_s']:.1f} s) vs {h['hta_s']:.1f} s; goal <= 0.1x"))
        rows.append(("  peak RSS dfcompass / HTA", _x(h["rss_ratio"]),
                     f"import {h['import_rss_mib']:.0f} MiB, busiest worker {h['worker_rss_mib']} MiB vs "
                     f"{h['hta_rss_mib']:.0f} MiB; goal <= 0.1x"))
    return rows


def seed_rows(r: dict[str, Any]) -> list[Row]:
    c = r["cases"]
    bt, ours = c["babeltrace2 dummy"], c["seed analyses"]
    return [
        ("seed analyses / babeltrace2 dummy", _x(r["ratio"]), "events/s against events/s, same trace"),
        ("seed analyses: read + every one", f"{ours['events_per_s'] / 1e6:.2f} M ev/s",
         f"target >= {r['target_events_per_s'] / 1e6:.2f} M ev/s (10M events in 30 s); best {ours['best_s']:.2f} s; "
         f"ran: {', '.join(ours['available'])}"),
        ("  verdict", verdict(r["pass"]), ""),
        ("babeltrace2 --output-format=dummy", f"{bt['events_per_s'] / 1e6:.2f} M ev/s", f"best {bt['best_s']:.3f} s"),
        ("trace", f"{r['events']:,} events", r["trace"]),
    ]


def placement_rows(r: dict[str, Any]) -> list[Row]:
    g, big, two, ok, tg = r["milp_gap"], r["big"], r["two_host"], r["pass"], r["targets"]
    rows: list[Row] = [
        ("search gap to MILP optimum, mean", f"{g['search_mean'] * 100:.2f}%",
         f"target <= {tg['gap'] * 100:.0f}%; max {g['search_max'] * 100:.2f}%; optimal on {g['search_optimal']}"
         f"/{g['instances']} (<= 20 tasks; {g['unproven']} not proven by the MILP, left out)"),
        ("  verdict", verdict(ok["gap"]), ""),
        ("HEFT gap to MILP optimum, mean", f"{g['heft_mean'] * 100:.2f}%", f"max {g['heft_max'] * 100:.2f}%"),
    ]
    for suite, q in r["ratio_to_heft"].items():
        rows.append((f"search / HEFT makespan, {suite}", _x(q["mean"]),
                     f"min {_x(q['min'])}, max {_x(q['max'])} over {q['n']}; slowest {q['max_time_s']:.1f} s"))
    rows += [
        ("  verdict: never worse than HEFT", verdict(ok["never_worse"]), ""),
        ("  verdict: layered >= 5% better", verdict(ok["improvement"]), f"target ratio <= {1 - tg['improvement']:.2f}x"),
        (f"search planning time, {big['tasks']:,} tasks", f"{big['search_s']:.2f} s",
         f"target <= {tg['time_s']:.0f} s; HEFT alone {big['heft_s']:.2f} s; ratio to HEFT {_x(big['ratio'])}"),
        ("  verdict", verdict(ok["time"]), ""),
        ("two-host case: naive / searched", _x(two["gain"]),
         f"{two['naive_ns'] / 1e6:.1f} ms -> {two['search_ns'] / 1e6:.1f} ms; cross-host edges "
         f"{two['cross_host_edges_naive']} -> {two['cross_host_edges_search']}"),
    ]
    return rows


def startup_rows(r: dict[str, Any]) -> list[Row]:
    c = r["cases"]
    return [
        ("dfcompass --help / python -c pass", _x(r["ratio_python"]), "what dfcompass adds to an interpreter start"),
        ("dfcompass --help / babeltrace2 --help", _x(r["ratio_babeltrace2"]), ""),
        ("dfcompass --help", f"{c['dfcompass --help']['best_s']:.3f} s", f"target < {r['target_s']:.1f} s"),
        ("dfcompass info /nonexistent / --help", _x(r["ratio_missing_path_to_help"]),
         f"target <= {r['missing_path_target']:.1f}x: the path is checked before anything heavy loads"),
        ("  verdict", verdict(r["pass"]), ""),
    ]


def kernel_rows(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [("skipped", "-", r["skipped"])]
    rows: list[Row] = [
        ("ops joined to their kernels (rank 0 / rank 1)", f"{r['joined']['0']} / {r['joined']['1']}", ""),
        ("median |error| on rank 1: A100 datasheet roofline", f"{r['datasheet'] * 100:.0f}%", "nothing fitted"),
        ("median |error| on rank 1: the cost model as used", f"{r['as_used'] * 100:.0f}%", "roofline + 5 us launch"),
        ("median |error| on rank 1: calibrated on rank 0", f"{r['calibrated'] * 100:.0f}%",
         f"in sample on rank 0: {r['calibrated_in_sample'] * 100:.0f}%"),
    ]
    for row in r["per_op"]:
        rows.append((f"  {row['op']} (x{row['count']})", f"{row['median_abs_error'] * 100:.0f}%",
                     f"median {row['median_error'] * 100:+.0f}%, p10 {row['p10_error'] * 100:+.0f}%, "
                     f"p90 {row['p90_error'] * 100:+.0f}%" + ("" if row["modelled"] else "; no FLOP model")))
    return rows


def gpu_rows(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [("skipped", "-", r["skipped"])]
    rows: list[Row] = [(f"kernel model, {k['held_out']} held out ({k['ops']} ops)",
                        f"{k['calibrated'] * 100:.0f}%", f"median |error| calibrated on the other two; as used "
                        f"{k['as_used'] * 100:.0f}%, datasheet {k['datasheet'] * 100:.0f}%") for k in r["rotation"]]
    for p in r["programs"]:
        low, high = p["range_ms"]
        rows.append((f"{p['name']}: step on the GPU", f"{p['predicted_ms']:.2f} ms predicted",
                     f"range {low:.2f}-{high:.2f}; measured {p['measured_ms']:.2f} ms "
                     f"({'inside' if p['holds'] else 'OUTSIDE'}, error {p['step_error'] * 100:+.0f}%)"))
        rows.append((f"{p['name']}: speedup over the CPU", f"{p['predicted_speedup']:.2f}x predicted",
                     f"measured {p['measured_speedup']:.2f}x"))
    return rows


def hta_rows(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [("skipped", "-", r["skipped"])]
    rows: list[Row] = []
    for name, t in r["traces"].items():
        rows.append((f"{name}: time dfcompass / HTA", _x(t["time_ratio_dfcompass_per_hta"]),
                     f"fresh processes, JSON to numbers, best of {r['rounds']}; peak RSS ratio "
                     f"{_x(t['rss_ratio_dfcompass_per_hta'])}"))
    return rows


def kineto_rows(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [("skipped", "-", r["skipped"])]
    rows: list[Row] = [("dfcompass: import-kineto + breakdown", f"{r['dfcompass_s']:.1f} s",
                        f"{r['events']:,} events ({r['gzip_mb']:.0f} MB gzipped); peak {r['dfcompass_rss_kib'] / 1024:.0f} MiB"),
                       ("dfcompass: import-kineto alone", f"{r['dfcompass_import_s']:.1f} s",
                        f"peak {r['dfcompass_import_rss_kib'] / 1024:.0f} MiB"),
                       ("import: columns / checked per-event path", _x(r["time_ratio_import_fast_per_checked"]),
                        f"checked {r['dfcompass_checked_s']:.1f} s; peak RSS "
                        f"{_x(r['rss_ratio_import_fast_per_checked'])} ({r['dfcompass_checked_rss_kib'] / 1024:.0f} MiB)")]
    if "hta_s" in r:
        rows += [("HTA: load + temporal breakdown", f"{r['hta_s']:.1f} s", f"peak {r['hta_rss_kib'] / 1024:.0f} MiB"),
                 ("time dfcompass / HTA", _x(r["time_ratio_dfcompass_per_hta"]),
                  f"goal <= 0.1x; the import alone {_x(r['time_ratio_import_per_hta'])}"),
                 ("peak RSS dfcompass / HTA", _x(r["rss_ratio_dfcompass_per_hta"]),
                  f"goal <= 0.1x; the import alone {_x(r['rss_ratio_import_per_hta'])}")]
    return rows


def pace_rows(r: dict[str, Any]) -> list[Row]:
    """Issue 34's rows: each a ratio of medians measured side by side, with the load average."""
    c, t, ok = r["cases"], r["targets"], r["pass"]
    mib = 1024 * 1024
    rows: list[Row] = [
        ("load average (1 min) before / after", f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f}",
         f"medians of {r['rounds']} interleaved rounds"),
        ("analyze --no-sections, 1M events / babeltrace2 dummy",
         f"{_x(r['no_sections'])} ({c['analyze --no-sections']['wall_s']:.2f} s / {c['babeltrace2 dummy']['wall_s']:.2f} s)",
         f"target >= {t['no_sections']}x: {verdict(ok['no_sections'])}"),
        ("analyze (all sections), 1M events / babeltrace2 dummy",
         f"{_x(r['all_sections'])} ({c['analyze (all sections)']['wall_s']:.1f} s)",
         f"target >= {t['all_sections']}x: {verdict(ok['all_sections'])}"),
        ("peak RSS of analyze --no-sections / trace size",
         f"{r['rss_per_trace']:.1f}x ({c['analyze --no-sections']['rss_kib'] / 1024:.0f} MiB / "
         f"{r['trace_bytes'] / mib:.0f} MiB); all sections {r['rss_per_trace_all']:.1f}x",
         f"target <= {t['rss_per_trace']}x: {verdict(ok['rss_per_trace'])}"),
        ("states --csv / states --at 0 (the engine)", f"+{r['csv_extra'] * 100:.0f}%",
         f"target <= +{t['csv_extra'] * 100:.0f}%: {verdict(ok['csv_extra'])}"),
        ("states --parquet / states --at 0 (the engine)", f"+{r['parquet_extra'] * 100:.0f}%",
         "the same rows as Parquet (no target)"),
        ("info /nonexistent / --help", _x(r["missing_path"]),
         f"target <= {t['missing_path']}x: {verdict(ok['missing_path'])}"),
        ("recommend-placement, 10k-node graph", f"{r['placement_cpu_s']:.1f} s CPU (HEFT alone {r['heft_cpu_s']:.2f} s)",
         f"target <= {t['placement_cpu_s']:.0f} s CPU: {verdict(ok['placement_cpu_s'])}"),
    ]
    if "lstm_placement" in r:
        rows.append(("recommend-placement, 27k-op LSTM-cell trace / its recorded run",
                     f"{_x(r['lstm_placement'])} ({c['recommend-placement LSTM']['wall_s']:.1f} s / "
                     f"{c['record LSTM']['wall_s']:.1f} s)",
                     f"target <= {t['lstm_placement']:.0f}x: {verdict(ok['lstm_placement'])}"))
    if "gpu_all_sections" in r:
        rows.append(("analyze (all sections), 1M-event Kineto GPU import / babeltrace2 dummy",
                     f"{r['gpu_all_sections']:.3f}x ({c['analyze GPU (all sections)']['wall_s']:.1f} s, "
                     f"{c['analyze GPU (all sections)']['rss_kib'] / 1024:.0f} MiB)",
                     f"target >= {t['all_sections']}x: {verdict(r['gpu_all_sections'] >= t['all_sections'])}"))
    if "big_s" in r:
        rows.append(("analyze --no-sections, 10M events", f"{r['big_s']:.1f} s ({_x(r['big_ratio'])} babeltrace2), "
                     f"RSS {r['big_rss_per_trace']:.1f}x the trace", f"target <= {t['big_s']:.0f} s: {verdict(ok['big_s'])}"))
    return rows


def verify_rows(r: dict[str, Any]) -> list[Row]:
    tg = r["targets"]
    rows: list[Row] = []
    for name, p in r["programs"].items():
        rows += [
            (f"{name}: speedup predicted / measured", f"{p['predicted_speedup']:.2f}x / {p['measured_speedup']:.2f}x",
             f"{p['nodes']} nodes on cpu:0,cpu:1; measured per round: "
             + ", ".join(f"{x:.2f}x" for x in p["measured_speedups"])),
            (f"{name}: step error before refit", f"{p['error_before_refit'] * 100:+.1f}%",
             f"target within {tg['before'] * 100:.0f}%; {verdict(p['pass_before'])}"),
            (f"{name}: step error after refit", "-" if p["error_after_refit"] is None else f"{p['error_after_refit'] * 100:+.1f}%",
             f"held-out steps; target within {tg['after'] * 100:.0f}%; {verdict(p['pass_after'])}"),
            (f"{name}: one-lane plan (sanity)", f"{p['sequential_predicted_speedup']:.2f}x",
             f"predicted; its step error {p['sequential_error'] * 100:+.1f}%"),
        ]
        for condition in ("alone", "burner"):
            c = p.get(condition)
            if c:  # the verifies of this condition: the printed range against verify's own A/B rounds
                rows.append((f"{name}: measured inside the printed range ({condition})",
                             f"{c['inside_range']} of {c['verifies']}",
                             f"overlapping {c['overlapping_range']}; one-lane plan {c['sequential_speedup']:.2f}x "
                             f"({c['sequential_interval'][0]:.2f}-{c['sequential_interval'][1]:.2f}x)"))
        if (cal := p.get("calibration")) is not None:  # what `record` measured, which the range used
            rows.append((f"{name}: hand-over / contention at record", f"{cal['handover_p50_ns'] / 1e3:.0f} us / "
                         f"{cal['contention']:.2f}x", f"beside a busy core: p90 {cal['busy_handover_p90_ns'] / 1e3:.0f} us, "
                         f"{cal['busy_contention']:.2f}x; printed range {p['speedup_range'][0]:.2f}-"
                         f"{p['speedup_range'][1]:.2f}x" if p.get("speedup_range") else ""))
    rows.append(("cores", str(r["cores"]), r.get("notice", "two lanes can overlap")))
    return rows


def _run_one(name: str, fn: Any, results: dict[str, Any]) -> bool:
    """Run one benchmark; on failure record the error and carry on with the others."""
    t0 = time.perf_counter()
    try:
        results[name] = fn()
    except Exception as exc:  # a broken benchmark must not hide the others' results
        traceback.print_exc()
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
        return False
    results[name]["duration_s"] = time.perf_counter() - t0
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["recorder", "read", "ctf", "torch", "job", "engine", "seed", "placement", "startup", "verify", "kernels", "gpu", "hta", "kineto", "scale", "dask", "tf", "realworld", "pace"], help="run one benchmark")
    parser.add_argument("--big", action="store_true", help="scale: also a 10M-event trace (minutes, GBs)")
    parser.add_argument("--examples", help="realworld: a checkout or git repository of pytorch/examples")
    parser.add_argument("--nodes", type=int, default=200_000, help="node executions per recorder run")
    parser.add_argument("--rounds", type=int, default=0,
                        help="alternating rounds (default: 7 recorder, 5 read, 5 torch)")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"versions": versions(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    ok = True
    if args.only in (None, "recorder"):
        ok &= _run_one("recorder_cost", lambda: recorder_cost.run(args.nodes, args.rounds or 7), results)
    if args.only in (None, "read"):
        ok &= _run_one("read_speed", lambda: read_speed.run(args.rounds or 5), results)
    if args.only in (None, "ctf"):
        ok &= _run_one("ctf_speed", lambda: ctf_speed.run(args.rounds or 3), results)
    if args.only in (None, "torch"):
        ok &= _run_one("torch_overhead", lambda: torch_overhead.run(args.rounds or 5), results)
    if args.only in (None, "tf"):
        ok &= _run_one("tf_overhead", lambda: tf_overhead.run(args.rounds or 3), results)
    if args.only in (None, "job"):
        ok &= _run_one("job_overhead", lambda: job_overhead.run(args.rounds or 3), results)
    if args.only in (None, "engine"):
        ok &= _run_one("engine_speed", lambda: engine_speed.run(args.rounds or 3), results)
    if args.only in (None, "scale"):
        ok &= _run_one("engine_scale", lambda: engine_scale.run(args.big), results)
    if args.only in (None, "dask"):
        ok &= _run_one("dask_scale", dask_scale.run, results)
    if args.only in (None, "seed"):
        ok &= _run_one("seed_speed", lambda: seed_speed.run(args.rounds or 3), results)
    if args.only in (None, "placement"):
        ok &= _run_one("placement", placement_bench.run, results)
    if args.only in (None, "startup"):
        ok &= _run_one("startup", lambda: startup.run(args.rounds or 7), results)
    if args.only in (None, "kernels"):
        ok &= _run_one("kernels", kernel_model.run, results)
    if args.only in (None, "gpu"):
        ok &= _run_one("gpu_prediction", gpu_prediction.run, results)
    if args.only in (None, "hta"):
        ok &= _run_one("hta", lambda: hta_speed.run(args.rounds or 3), results)
    if args.only in (None, "kineto"):
        ok &= _run_one("kineto", lambda: kineto_scale.run(args.rounds or 1), results)
    if args.only in (None, "verify"):
        ok &= _run_one("verify", lambda: verify_bench.run(args.rounds or 2), results)
    if args.only in (None, "pace"):
        ok &= _run_one("pace", lambda: analysis_pace.run(args.rounds or 3, args.big), results)
    if args.only in (None, "realworld"):
        ok &= _run_one("realworld", lambda: realworld.run(examples_arg=args.examples), results)
    write_json(OUT_DIR / "results.json", results)

    sections: list[tuple[str, list[Row]]] = []
    for key, title, rows_of in (("recorder_cost", "Recorder cost", recorder_rows),
                                ("read_speed", "Read speed (5M events)", read_rows),
                                ("ctf_speed", "Our CTF 1.8 reader against babeltrace2 (LTTng many-threads)", ctf_rows),
                                ("torch_overhead", "PyTorch recording overhead", torch_rows),
                                ("tf_overhead", "TensorFlow recording overhead (Keras CNN and MLP)", tf_rows),
                                ("job_overhead", "Recording a 2-rank DDP job", job_rows),
                                ("engine_speed", "Headless analyses speed", engine_rows),
                                ("engine_scale", "analyze as the trace grows", scale_rows),
                                ("dask_scale", "analyze JOB/ on Dask (1M-event rank traces)", dask_rows),
                                ("seed_speed", "Seed analyses speed (1M events)", seed_rows),
                                ("placement", "Placement quality and speed", placement_rows),
                                ("startup", "Command-line start-up", startup_rows),
                                ("kernels", "GPU kernel model against real A100 kernels", kernel_rows),
                                ("gpu_prediction", "GPU predicted from CPU traces, measured on an H200", gpu_rows),
                                ("hta", "Against HTA (traceinsight 0.6.1) on the shared Kineto traces", hta_rows),
                                ("kineto", "Kineto import at scale (nccl trace x25)", kineto_rows),
                                ("verify", "Verified plans: predicted against measured", verify_rows),
                                ("pace", "Analysis at reading speed (issue 34)", pace_rows),
                                ("realworld", "Real programs: every command and the edges", realworld_rows)):
        if key in results:
            r = results[key]
            rows = [("ERROR", "ERROR", r["error"])] if "error" in r else rows_of(r)
            sections.append((title, rows))
    v = results["versions"]
    sections.append(("Environment", [
        ("python / numpy", f"{v['python']} / {v['numpy']}", f"{v['cpus']} CPUs"),
        ("babeltrace2", v["babeltrace2"], f"bt2 Python {v['bt2_python']}"),
        *([("torch", results["torch_overhead"]["torch"], "")] if "torch" in results.get("torch_overhead", {}) else []),
        ("results", str(OUT_DIR / "results.json"), ""),
    ]))
    print_report(sections)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
