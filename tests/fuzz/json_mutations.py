"""Seeded mutations of the JSON files users hand to placement: graph files (recommend-placement)
and plans (verify). Hostile values (NaN, infinities, 2^200, negative, strings, deep nesting) put
where numbers, names and devices belong, keys deleted, the text cut or bit-flipped."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

HOSTILE: list[Any] = [None, True, -1, 0, 2**64, 2**200, float("nan"), float("inf"), -float("inf"), 1e308, "",
                      "x" * 300, "<&'\">", "ünï", "cpu:-1", "cpu:0/../../x", "cuda:99999999999", [], {}, [[1]], 1.5]


def graph_document() -> dict[str, Any]:
    return {"directed": True, "multigraph": False,
            "graph": {"links": [{"src": "cpu", "dst": "cuda:0", "latency_ns": 5000, "gb_per_s": 12.5}]},
            "nodes": [{"id": "load", "costs": {"cpu": 50000, "cuda:0": None}, "actual_device": "cpu"},
                      {"id": "conv", "costs": {"cpu": 400000, "cuda:0": 20000}, "memory_bytes": 4096},
                      {"id": "head", "costs": {"cpu": 200000, "cuda:0": 10000}, "op": "aten::mm"}],
            "edges": [{"source": "load", "target": "conv", "bytes": 1000000},
                      {"source": "conv", "target": "head", "bytes": 4096}]}


def plan_document() -> dict[str, Any]:
    return {"predicted_makespan_ns": 90, "schedule": [
        {"node": "add", "op": "aten::add", "device": "cpu", "start_ns": 0, "end_ns": 40},
        {"node": "mm", "op": "aten::mm", "device": "cuda:0", "start_ns": 40, "end_ns": 90}]}


def _slots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value of the document (dict keys and list indexes)."""
    found = [path]
    if isinstance(value, dict):
        for key, sub in value.items():
            found += _slots(sub, (*path, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            found += _slots(sub, (*path, index))
    return found


def mutate_json(document: dict[str, Any], seed: int) -> bytes:
    """`document` damaged the way seed `seed` says: 1 to 4 changes, then maybe a cut or bit flips."""
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 4)):
        slots = _slots(document)[1:]
        if not slots:  # an earlier change left the document empty
            break
        path = rng.choice(slots)
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        choice = rng.random()
        if choice < 0.6:  # a copy: the shared lists and dicts of HOSTILE must not be changed in place
            parent[path[-1]] = copy.deepcopy(rng.choice(HOSTILE))
        elif choice < 0.8 and isinstance(parent, dict):
            del parent[path[-1]]
        elif choice < 0.9:
            parent[path[-1]] = json.loads("[" * 50 + "]" * 50)
    text = json.dumps(document).encode()  # NaN and Infinity as Python writes them
    roll = rng.random()
    if roll < 0.1:
        text = text[: rng.randrange(len(text))]
    elif roll < 0.2:
        flipped = bytearray(text)
        for _ in range(rng.randint(1, 3)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        text = bytes(flipped)
    elif roll < 0.25:
        text = b"[" * 200_000 + b"]" * 200_000
    return text
