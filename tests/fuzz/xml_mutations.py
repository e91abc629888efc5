"""Seeded mutations of a Trace Compass XML analysis: hostile attribute values, deleted attributes
and elements, text, truncation. Used by tests/test_engine/test_xml_fuzz.py."""

from __future__ import annotations

import random

from lxml import etree

HOSTILE = ["", "<&'\">", "x" * 500, "-1", "99999999999999999999", "1e999", "*", "..", "/", "ünï", "$", "(", "[",
           "\\", "NaN"]


def mutate_xml(source: bytes, seed: int) -> bytes:
    rng = random.Random(seed)
    tree = etree.fromstring(source).getroottree()
    elements = list(tree.iter())
    for _ in range(rng.randint(1, 4)):
        element = rng.choice(elements)
        kind = rng.random()
        if kind < 0.4 and element.attrib:
            element.attrib[rng.choice(list(element.attrib))] = rng.choice(HOSTILE)
        elif kind < 0.6 and element.attrib:
            del element.attrib[rng.choice(list(element.attrib))]
        elif kind < 0.8 and element.getparent() is not None:
            element.getparent().remove(element)
            elements = list(tree.iter())
        else:
            element.text = rng.choice(HOSTILE)
    data: bytes = etree.tostring(tree)
    if rng.random() < 0.15:
        data = data[: rng.randrange(len(data))]
    return data
