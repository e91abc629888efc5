"""Seeded mutations of a small Kineto trace: hostile values, missing keys, truncations, bit flips.

Used by tests/test_importers/test_kineto_fuzz.py (a few hundred cases) and by ``make fuzz``-style
runs with more seeds. Each case is fully determined by its seed.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

HOSTILE: list[Any] = [
    None, True, -1, 0, 2**64, 2**70, -(2**63), "1e999999999", "", "x" * 300, "<&'\">", "ünï©ødé", [], {},
    [[1, 2], "a"], {"a": [1]}, 1.5, -0.0,
]
RAW_NUMBERS = ["1e999999999", "-1e999999999", "1e308", "9" * 5000, "-0.000000000001", "NaN", "Infinity"]


def base_document() -> dict[str, Any]:
    """A small trace with every kind of event the importer reads."""
    pid, tid = 100, 7
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "main"}},
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": pid, "tid": tid, "ts": 5, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": tid, "ts": 10, "dur": 20,
             "args": {"Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"], "Module Hierarchy": "m.fc"}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid, "ts": 12, "dur": 3,
             "args": {"correlation": 9}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 16, "dur": 4,
             "args": {"correlation": 9, "device": 0, "stream": 7, "grid": [1, 1, 1], "block": [32, 1, 1]}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
             "ts": 30, "dur": 2, "args": {"bytes": 256, "device": 0, "stream": 7}},
            {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid, "tid": tid, "ts": 11, "s": "t",
             "args": {"Device Type": 1, "Device Id": 0, "Bytes": 256, "Total Allocated": 256, "Addr": 4096}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9, "pid": pid, "tid": tid, "ts": 12},
        ],
    }


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _delete(doc: Any, path: tuple[Any, ...]) -> None:
    for key in path[:-1]:
        doc = doc[key]
    del doc[path[-1]]


def mutate(seed: int) -> bytes:
    """The bytes of one mutated file."""
    rng = random.Random(seed)
    doc = copy.deepcopy(base_document())
    paths = [p for p in _paths(doc) if p]
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(paths)
        try:
            choice = rng.random()
            if choice < 0.5:
                _set(doc, path, copy.deepcopy(rng.choice(HOSTILE)))
            elif choice < 0.7:
                _delete(doc, path)
            else:
                events = doc["traceEvents"]
                events.append(copy.deepcopy(rng.choice(events)))
        except (KeyError, IndexError, TypeError, AttributeError):
            pass  # the path went away with an earlier mutation
        paths = [p for p in _paths(doc) if p]
    text = json.dumps(doc)
    kind = rng.random()
    if kind < 0.2:  # a raw number JSON cannot carry as a Python value
        text = text.replace(rng.choice(["10", "20", "7", "100", "9"]), rng.choice(RAW_NUMBERS), 1)
    data = text.encode()
    if 0.2 <= kind < 0.3:
        data = data[: rng.randint(0, len(data))]  # truncated
    elif 0.3 <= kind < 0.4:
        flips = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(flips))
            flips[at] ^= 1 << rng.randrange(8)
        data = bytes(flips)
    return data
