"""The trace string policy: printable ASCII out, the exact text back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import HOSTILE
from tracer.strings import escape, unescape

ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=200)  # surrogates and NUL included


def _printable_ascii(text: str) -> bool:
    return all(0x20 <= ord(c) <= 0x7E for c in text)


@settings(max_examples=50, deadline=None)
@given(ANY_TEXT)
def test_escape_round_trips_any_text(text: str) -> None:
    escaped = escape(text)
    assert _printable_ascii(escaped)
    assert unescape(escaped) == text


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_strings_round_trip(text: str) -> None:
    escaped = escape(text)
    assert _printable_ascii(escaped)
    assert "\0" not in escaped
    assert unescape(escaped) == text


@pytest.mark.parametrize(
    "text,escaped",
    [
        ("plain ascii <&\"'>", "plain ascii <&\"'>"),
        ("a\\b", "a\\\\b"),
        ("\0", "\\x00"),
        ("\n\t\x7f", "\\x0a\\x09\\x7f"),
        ("h\u00e9", "h\\xe9"),
        ("\u2603", "\\u2603"),
        ("\ud800", "\\ud800"),
        ("\U0001F600", "\\U0001f600"),
        ("", ""),
    ],
)
def test_escape_forms(text: str, escaped: str) -> None:
    assert escape(text) == escaped
    assert unescape(escaped) == text


def test_text_that_looks_escaped_survives() -> None:
    for text in ("\\x41", "\\u2603", "\\\\", "\\", "end\\"):
        assert unescape(escape(text)) == text
