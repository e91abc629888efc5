"""The indented JSON writer must write what json.dumps(indent=2, sort_keys=True) writes, for any value."""

from __future__ import annotations

import dataclasses
import enum
import json
import random
from typing import Any

import pytest

from tc_analyses.export.json_text import dumps_indented
from tc_analyses.analyses.result import one_level as _fields, plain


class Kind(enum.IntEnum):
    A = 3


class Text(str):
    pass


@dataclasses.dataclass
class Row:
    name: str
    cost: float
    inner: Any = None


def _value(rng: random.Random, depth: int = 0) -> Any:
    scalars: list[Any] = [None, True, False, 0, -7, 2**80, Kind.A, 0.1, -0.0, 1e-05, 1e16, float("nan"),
                          float("inf"), -float("inf"), 5e-324, "", "a,b", 'q"\\\n\t', "é<&>", "\U0001f600",
                          "\ud800", Text("sub")]
    roll = rng.random()
    if depth > 3 or roll < .45:
        return rng.choice(scalars)
    if roll < .6:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if roll < .7:
        return tuple(_value(rng, depth + 1) for _ in range(rng.randint(0, 3)))
    if roll < .9:
        keys: list[Any] = ["b", "a", "Z", "é", "k1", "k10", Text("t")]
        if rng.random() < .15:  # json converts these keys itself
            keys += [1, 2.5, True, None]
        return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return Row(rng.choice(["x", "ü"]), rng.choice([1.5, float("nan")]), _value(rng, depth + 1))


def test_the_text_is_json_dumps_text() -> None:
    rng = random.Random(3)
    refused = 0
    for _ in range(3000):
        value = _value(rng)
        try:
            expected = json.dumps(value, indent=2, sort_keys=True, default=_fields)
        except TypeError:  # keys json cannot sort (a str beside None): the same error
            refused += 1
            with pytest.raises(TypeError):
                dumps_indented(value, _fields)
            continue
        assert dumps_indented(value, _fields) == expected
    assert 0 < refused < 300


def test_json_errors_are_json_errors() -> None:
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented(circular, _fields)
    with pytest.raises(TypeError):
        dumps_indented({"a": 1, 2: {1j: 3}}, _fields)  # a complex key: json's TypeError

    def refuse(value: Any) -> Any:
        raise TypeError(f"not JSON: {value!r}")

    with pytest.raises(TypeError, match="not JSON"):
        dumps_indented({"a": [object()]}, refuse)
    deep: Any = 1
    for _ in range(300):  # deep but not circular: the same text as json's
        deep = [deep]
    assert dumps_indented(deep, _fields) == json.dumps(deep, indent=2, sort_keys=True, default=_fields)


def test_without_a_default_unknown_values_are_json_errors() -> None:
    assert dumps_indented({"b": [1.5, None], "a": {}}) == json.dumps({"b": [1.5, None], "a": {}}, indent=2, sort_keys=True)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": object()})
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"a": float("nan"), "b": object()})  # the writer for NaN refuses it too


@dataclasses.dataclass
class Result:
    rows: tuple[Row, ...]
    by_name: dict[Any, Any]
    findings: tuple[str, ...] = ()


def test_plain_data_is_what_asdict_gives() -> None:
    """An analysis's data as JSON values: the dataclasses inside converted where the encoder meets
    them, the same values as converting every one first (dataclasses.asdict) and the findings left out."""
    rng = random.Random(5)
    for _ in range(300):
        data = Result(tuple(Row(rng.choice("xyü"), rng.random(), _value(rng, 2)) for _ in range(rng.randint(0, 3))),
                      {rng.choice(["k", 3, "é"]): Row("r", 0.5, Kind.A)}, ("left out",))
        expected = {k: v for k, v in dataclasses.asdict(data).items() if k != "findings"}
        assert plain(data) == json.loads(json.dumps(expected, default=str))
