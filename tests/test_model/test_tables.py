"""Run tables' text columns: encode() gives the codes and sorted labels np.unique gives."""

from __future__ import annotations

import random

import numpy as np

from tc_analyses.model.tables import encode


def test_encode_equals_numpy_unique_on_texts() -> None:
    rng = random.Random(3)
    pool = ["a", "b", "zz", "é", "", "aa", "B", "aten::mm", "<&>'\"", "ünï"]
    for _ in range(100):
        values = [rng.choice(pool) for _ in range(rng.randint(1, 300))]
        labels, codes = np.unique(np.asarray(values, dtype=object), return_inverse=True)
        for given in (values, np.asarray(values, dtype=object)):
            got_codes, got_labels = encode(given)
            assert got_labels.tolist() == labels.tolist()
            assert got_codes.dtype == np.int32 and got_codes.tolist() == codes.reshape(-1).tolist()


def test_encode_of_nothing() -> None:
    codes, labels = encode([])
    assert len(codes) == 0 and len(labels) == 0 and codes.dtype == np.int32
