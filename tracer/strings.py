"""String policy for trace strings: ASCII as is, a backslash escape for everything else.

Trace Compass decodes CTF ``string`` fields as Latin-1, so UTF-8 would show as mojibake. We
write printable ASCII unchanged and escape the rest the way Python's ``unicode_escape`` codec
reads it back: ``\\\\`` for a backslash, ``\\xNN`` for other control and Latin-1 characters,
``\\uNNNN`` / ``\\UNNNNNNNN`` above. NUL cannot appear raw in a CTF string, so it is escaped
too. :func:`unescape` restores the original exactly (lone surrogates included).

>>> escape("héllo ☃ a\\\\b")
'h\\\\xe9llo \\\\u2603 a\\\\\\\\b'
>>> unescape(escape("héllo ☃ a\\\\b")) == "héllo ☃ a\\\\b"
True
"""

from __future__ import annotations

import codecs
import re

_NEEDS_ESCAPE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")  # anything but printable ASCII minus '\'


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x5C:
        return "\\\\"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape(text: str) -> str:
    """Return `text` as printable ASCII that :func:`unescape` turns back into `text`."""
    if _NEEDS_ESCAPE.search(text) is None:
        return text
    return _NEEDS_ESCAPE.sub(_escape_char, text)


def unescape(text: str) -> str:
    """Inverse of :func:`escape`."""
    if "\\" not in text:
        return text
    return codecs.decode(text, "unicode_escape")
