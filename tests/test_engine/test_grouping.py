"""unique_inverse, pair_keys and lexsort_pairs give numpy's sort-based answer, on both of their routes."""

from __future__ import annotations

import numpy as np
import pytest

from tc_analyses.engine.grouping import lexsort_pairs, pair_keys, search_sorted, unique_inverse


def _columns() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [
        np.zeros(0, dtype=np.int64),
        np.array([5]),
        np.array([-3, -3, -1, -2**40]),  # wide: the sort route
        rng.integers(-50, 50, 1000),  # dense, negative
        rng.integers(0, 10**6, 1000) * 2**32 + 7,  # wide
        rng.integers(0, 300_000, 200_000),  # dense, many distinct
        np.array([2**62, -2**62, 0]),  # the range does not fit int64: only Python ints see it
        rng.integers(0, 3, 5000).astype(np.int32),
        np.sort(rng.integers(0, 10**4, 1000)) * 2**32,  # wide and in order (times by position), repeats
    ]


@pytest.mark.parametrize("column", _columns(), ids=lambda c: f"{len(c)}-rows")
def test_unique_inverse_is_numpys(column: np.ndarray) -> None:
    unique, inverse = unique_inverse(column)
    want_unique, want_inverse = np.unique(column, return_inverse=True)
    assert unique.tolist() == want_unique.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()
    assert unique.dtype == np.int64 and inverse.dtype == np.int64


@pytest.mark.parametrize("scale", [1, 2**31, 2**40])
def test_pair_keys_sorts_pairs_first_by_first(scale: int) -> None:
    rng = np.random.default_rng(scale % 97)
    first = rng.integers(-5, 40, 3000) * scale
    second = rng.integers(-9, 9, 3000) * scale
    a, b, inverse = pair_keys(first, second)
    want = sorted(set(zip(first.tolist(), second.tolist())))
    assert list(zip(a.tolist(), b.tolist())) == want
    assert [want[i] for i in inverse.tolist()] == list(zip(first.tolist(), second.tolist()))
    empty = pair_keys(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    assert all(len(x) == 0 for x in empty)


@pytest.mark.parametrize("side", ["left", "right"])
def test_search_sorted_is_numpys_for_scattered_and_ordered_needles(side: str) -> None:
    rng = np.random.default_rng(3)
    haystack = np.sort(rng.integers(0, 1000, 50_000))  # many equal keys: the side matters
    for needles in (rng.integers(-5, 1005, 20_000), np.sort(rng.integers(0, 1000, 20_000)), np.array([7, 3])):
        assert search_sorted(haystack, needles, side).tolist() == np.searchsorted(haystack, needles, side).tolist()


@pytest.mark.parametrize("major", _columns(), ids=lambda c: f"{len(c)}-rows")
def test_lexsort_pairs_is_lexsort(major: np.ndarray) -> None:
    rng = np.random.default_rng(len(major))
    for minor in (rng.integers(-3, 3, len(major)), rng.integers(-2**62, 2**62, len(major)),
                  np.zeros(len(major), dtype=np.int64)):  # ties everywhere: row order decides
        assert lexsort_pairs(minor, major).tolist() == np.lexsort((minor, major)).tolist()


@pytest.mark.parametrize("in_order", [True, False])
def test_the_write_logs_grouped_search_is_searchsorted(in_order: bool) -> None:
    from tc_analyses.engine.columns import _search_grouped

    rng = np.random.default_rng(int(in_order))
    span = 10**6
    haystack = np.sort(rng.integers(0, 50, 20_000) * span + rng.integers(0, span, 20_000))
    attrs = rng.integers(0, 50, 9_000)
    orders = np.sort(rng.integers(0, span, 9_000)) if in_order else rng.integers(0, span, 9_000)
    distinct, index = unique_inverse(attrs)
    needles = attrs * span + orders
    assert _search_grouped(haystack, needles, index, len(distinct)).tolist() == \
        np.searchsorted(haystack, needles).tolist()


def test_lexsort_pairs_leaves_other_types_to_lexsort() -> None:
    big = np.array([2**63 + 5, 3, 2**63 + 1], dtype=np.uint64)
    assert lexsort_pairs(np.zeros(3, dtype=np.int64), big).tolist() == np.lexsort((np.zeros(3), big)).tolist()
    fractions = np.array([0.5, 0.2, 0.9])
    assert lexsort_pairs(fractions, np.zeros(3, dtype=np.int64)).tolist() == [1, 0, 2]
