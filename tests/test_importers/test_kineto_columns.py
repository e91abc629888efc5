"""The fast (columnar) Kineto path against the checked per-event path: the same trace, byte for
byte, the same summary, or the same one-line error (the checked path gives it).

Inputs: the fuzzer's mutations (odd types, cut files, hostile numbers), files built here for what
the fast path must take itself (negative tids, kernels, copies, steps, flows, memory, several
chunks), and the real traces under ../shared/traces/kineto when they are there.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fuzz.kineto_mutations import mutate
from tracer.importers import KinetoImportError, import_kineto
from tracer.importers import kineto_decode
from tracer.importers.kineto_decode import NotFast, us_to_ns
from tracer.importers.kineto_emit import ColumnConverter


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _both(src: Path, tmp_path: Path) -> tuple[Any, Any]:
    """(fast outcome, checked outcome): the summary and files, or the error's text."""
    outcomes = []
    for name, checked in (("fast", False), ("checked", True)):
        out = tmp_path / f"{src.stem}-{name}"
        try:
            summary = dataclasses.asdict(import_kineto(src, out, checked=checked))
            summary.pop("output")
            outcomes.append((summary, _tree(out)))
        except KinetoImportError as exc:
            outcomes.append(str(exc))
    return outcomes[0], outcomes[1]


def _takes(src: Path) -> bool:
    try:
        ColumnConverter(src).scan()
        return True
    except NotFast:
        return False


def test_calls_without_correlation_are_joined_by_their_flows(tmp_path: Path) -> None:
    """Older Kineto files give the correlation id only as the ac2g flow's id: the fast path reads
    the file again for the flows, as the checked path does, and joins the same events."""
    events = _events(5)
    for e in events:
        if e.get("cat") in ("cuda_runtime", "kernel", "gpu_memcpy", "cuda_sync") and e["ts"] % 3:
            e["args"].pop("correlation")
            if e["cat"] == "cuda_runtime":  # a flow start on the call
                events.append({"ph": "s", "cat": "ac2g", "id": 7000 + e["ts"], "pid": 7, "tid": -5, "ts": e["ts"]})
    src = tmp_path / "flows.json"
    src.write_bytes(_doc(events))
    assert _takes(src)
    fast, checked = _both(src, tmp_path)
    assert fast == checked
    joined = fast[0]["correlation"]
    assert joined["api_joined_by_flow"] > 0 and joined["gpu_joined_by_flow"] > 0 and joined["gpu_without_launch"] > 0


def test_mutated_files_give_what_the_checked_path_gives(tmp_path: Path) -> None:
    taken = 0
    for seed in range(120):
        src = tmp_path / f"case{seed}.json"
        src.write_bytes(mutate(seed))
        fast, checked = _both(src, tmp_path)
        assert fast == checked, f"seed {seed}"
        taken += _takes(src)
    assert taken > 20  # the fast path itself, not only its fallback, is what was compared


def _doc(events: list[dict[str, Any]], **top: Any) -> bytes:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events, "traceName": "t"}).encode()


def _events(n: int, full_config: bool = False) -> list[dict[str, Any]]:
    """A small training-like run: steps, nested ops with shapes, launches, kernels, copies, memsets,
    syncs, annotations, memory, fwdbwd and ac2g flows, a negative tid and a named stream. Kernels
    give two of the five launch figures, or all five (some out of range) with `full_config`."""
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": -5, "args": {"name": "main"}},
    ]
    for step in range(n):
        base = 1_000_000 + step * 1000
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 7, "tid": -5,
                    "ts": base, "dur": 900.5})
        for k in range(3):
            ts = base + 10 + k * 200
            out.append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 7, "tid": -5, "ts": ts,
                        "dur": 150.25, "args": {"Input Dims": [[8, 4], [4]], "Input type": ["float", "float"],
                                                "Module Hierarchy": "model.fc" if k else ""}})
            out.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": -5, "ts": ts,
                        "dur": 100.125})
            corr = step * 10 + k
            out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": -5,
                        "ts": ts + 20, "dur": 5, "args": {"correlation": corr}})
            kind = ("kernel", "gpu_memcpy", "gpu_memset")[k]
            name = ("gemm", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)")[k]
            out.append({"ph": "X", "cat": kind, "name": name, "pid": 0, "tid": "stream 7" if k else 7,
                        "ts": ts + 30, "dur": 40.001, "args": {"correlation": corr, "device": 0, "bytes": 64,
                                                               "grid": [1, 2, 3], "block": [32, 1, 1],
                                                               "registers per thread": 32, "blocks per SM": 0.5}})
            if full_config:
                out[-1]["args"].update({"registers per thread": -1 if step % 4 == 0 else 2**33 + step,
                                        "shared memory": 4096, "warps per SM": 2.0005 * step,
                                        "blocks per SM": 1e12 if step % 5 == 0 else 0.0025 * step,
                                        "est. achieved occupancy %": 150 if step % 3 == 0 else step})
            out.append({"ph": "f", "cat": "ac2g", "id": corr, "pid": 0, "tid": 7, "ts": ts + 30})
        out.append({"ph": "s", "cat": "fwdbwd", "id": step, "pid": 7, "tid": -5, "ts": base + 10})
        out.append({"ph": "f", "cat": "fwdbwd", "id": step, "pid": 7, "tid": -5, "ts": base + 210})
        out.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": base + 800,
                    "dur": 3, "args": {"correlation": 999, "device": 0, "stream": 7, "wait_on_stream": 3}})
        out.append({"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": base + 30,
                    "dur": 100, "args": {"device": 0, "stream": 7}})
        out.append({"ph": "X", "cat": "user_annotation", "name": "fwd", "pid": 7, "tid": -5, "ts": base + 5,
                    "dur": 500})
        out.append({"ph": "i", "name": "[memory]", "pid": 7, "tid": -5, "ts": base + 50, "s": "t",
                    "args": {"Bytes": 512 if step % 2 else -512, "Total Allocated": 1024, "Device Type": 1,
                             "Device Id": 0, "Addr": -4096}})
        out.append({"ph": "X", "cat": "Trace", "name": "skipped", "pid": "Spans", "tid": "x", "ts": base, "dur": 1})
    return out


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_run_with_every_kind_is_taken_by_columns_and_matches(tmp_path: Path, gz: bool) -> None:
    src = tmp_path / "run.json"
    text = _doc(_events(40, full_config=gz), distributedInfo={"rank": 3}, baseTimeNanoseconds=1_700_000_000_000_000_000)
    src.write_bytes(gzip.compress(text) if gz else text)
    assert _takes(src)
    fast, checked = _both(src, tmp_path)
    assert fast == checked
    assert fast[0]["remapped_ids"] == {"tid": {"-5": 1}}  # remapped by the fast path as the checked one does


def test_chunks_cut_only_between_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks far smaller than the file: braces and commas inside names must not cut a chunk."""
    monkeypatch.setattr(kineto_decode, "_BLOCK", 97)
    events = _events(6)
    for e in events[::3]:
        e["name"] = 'a},{"ph": "X"}, ] ' + str(e.get("name"))
    src = tmp_path / "small-blocks.json"
    src.write_bytes(_doc(events))
    assert _takes(src)
    fast, checked = _both(src, tmp_path)
    assert fast == checked


@pytest.mark.parametrize("text", [b'{"traceEvents": [{"ph": "X"},]}', b'{"traceEvents": [] , "traceEvents": []}',
                                  b'[{"ph": "X", "cat": "cpu_op", "ts": 1e400, "dur": 1}]', b'{"traceEvents": [1]}',
                                  # not UTF-8 in a member the fast decoder skips (msgspec checks only what it reads)
                                  b'[{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 1, '
                                  b'"args": {"skipped": "\xff"}}]'])
def test_what_columns_cannot_prove_goes_the_checked_way(tmp_path: Path, text: bytes) -> None:
    src = tmp_path / "odd.json"
    src.write_bytes(text)
    assert not _takes(src)
    fast, checked = _both(src, tmp_path)
    assert fast == checked


_OP = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
_KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
           "args": {"correlation": 1, "device": 0, "stream": 7}}


def _memory(ts: int, nbytes: int, **args: Any) -> dict[str, Any]:
    return {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts, "s": "t",
            "args": {"Bytes": nbytes, "Device Type": 1, **args}}


@pytest.mark.parametrize("text", [
    # a pid past 2**31 (a thread's key once overflowed int64)
    json.dumps({"traceEvents": [{**_OP, "pid": 2**31}, {**_OP, "pid": 2**32 - 1, "tid": 2**32 - 1}]}),
    # "cuda" (a [memory] event without a device id) and "cuda:0" sort alike: first use decides
    json.dumps({"traceEvents": [_memory(5, 8), _KERNEL]}),
    json.dumps({"traceEvents": [_memory(5, -8, **{"Device Id": 0}), _memory(6, 8, **{"Device Id": -1})]}),
    # an int launch figure past a float's range: 0 thousandths, as the checked path gives
    json.dumps({"traceEvents": [{**_KERNEL, "args": {**_KERNEL["args"], "registers per thread": 1, "shared memory": 2,
                                                    "blocks per SM": 10**400, "warps per SM": 1.5,
                                                    "est. achieved occupancy %": 50}}]}),
    # members after the events holding braces of their own
    json.dumps({"traceEvents": [_OP, _OP], "deviceProperties": [{"id": 0, "name": "A"}, {"id": 1, "name": "B"}],
                "x": {"y": {"z": 1}}}),
    # a second traceEvents spelt with an escape: the checked path's error
    '{"traceEvents": [], "trace\\u0045vents": []}',
], ids=["pid-past-2^31", "cuda-then-cuda0", "cuda0-then-cuda", "huge-launch-figure", "braces-after", "escaped-key"])
def test_what_a_differential_hunt_found(tmp_path: Path, text: str) -> None:
    """Files on which the two paths once differed (found by generating thousands of documents)."""
    src = tmp_path / "found.json"
    src.write_text(text)
    assert _takes(src) == ("u0045" not in text)  # the fast path itself, except for the escaped key
    fast, checked = _both(src, tmp_path)
    assert fast == checked


def test_times_become_exact_nanoseconds() -> None:
    import msgspec

    raws = [msgspec.Raw(t) for t in (b"1", b"-2.5", b"1700000000000000.123", b"0.001", b"12.3456", b"1e3",
                                     b'"7"', b"999999999999999.999", b"1.")]
    ns, ok = us_to_ns(raws)
    assert ok.tolist() == [True, True, True, True, False, False, False, True, False]
    assert ns[ok].tolist() == [1000, -2500, 1700000000000000123, 1, 999999999999999999]


def test_times_parsed_by_arrays_equal_the_decimal_path_on_random_numbers() -> None:
    import random
    from decimal import Decimal

    import msgspec

    from tracer.importers.kineto_source import us_to_ns as exact

    rng = random.Random(7)
    texts = []
    for _ in range(20_000):
        k = rng.random()
        if k < 0.5:
            texts.append(f"{rng.randint(0, 10 ** rng.randint(0, 17))}.{rng.randint(0, 999):0{rng.randint(1, 4)}d}")
        elif k < 0.7:
            texts.append(str(rng.randint(-10 ** rng.randint(0, 19), 10 ** rng.randint(0, 19))))
        elif k < 0.8:
            texts.append(f"-{rng.randint(0, 10 ** rng.randint(0, 16))}.{rng.randint(0, 9999)}")
        else:
            texts.append(rng.choice(["1e3", '"7"', "null", "-0", "0.000", "9999999999999999.999", "", "12.3456",
                                     "8999999999999999.999", "-8999999999999999.999", "1.5E2"]))
    ns, ok = us_to_ns([msgspec.Raw(t.encode()) for t in texts])
    taken = [(t, n) for t, n, o in zip(texts, ns.tolist(), ok.tolist()) if o]
    assert len(taken) > 10_000
    assert all(n == exact(int(t) if t.lstrip("-").isdigit() else Decimal(t)) for t, n in taken)


@pytest.fixture(scope="module")
def shared_kineto(shared_dir: Path) -> list[Path]:
    files = sorted((shared_dir / "traces" / "kineto").glob("*/*.json.gz"))
    if not files:
        pytest.skip("no Kineto traces under ../shared/traces/kineto")
    return files


def test_real_traces_are_taken_by_columns_and_match(shared_kineto: list[Path], tmp_path: Path) -> None:
    for src in shared_kineto:
        assert _takes(src), src.name
        fast, checked = _both(src, tmp_path)
        assert fast == checked, src.name
        assert isinstance(fast, tuple) and np.sum([len(b) for b in fast[1].values()]) > 0
