"""Reading user files with a bound on their size: a trace's metadata, a plan, a graph file.

A file named as one of these may be anything: ``/dev/zero``, a gzip bomb, a JSON array nested
200,000 deep. Each read here stops one byte past its kind's limit and fails with an ``OSError``
(``EFBIG``) naming the file, which every caller and the CLI already report in one line; gzip is
inflated in bounded steps, never whole; JSON nested deeper than Python's parser can follow is a
``json.JSONDecodeError``, as any other malformed JSON.
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from typing import Any

MiB = 1 << 20
METADATA_LIMIT = 64 * MiB  # a CTF metadata file (LTTng's biggest are a few MiB)
PLAN_LIMIT = 256 * MiB  # a placement plan's JSON, inflated (a 100,000-node plan is about 20 MiB)
GRAPH_LIMIT = 512 * MiB  # a computation-graph file
_GZIP_MAGIC = b"\x1f\x8b"


class TooLarge(OSError):
    """`path` holds more than `limit` bytes of `what` (inflated, for gzip): not read."""

    def __init__(self, path: str | os.PathLike[str], what: str, limit: int) -> None:
        super().__init__(errno.EFBIG, f"{what} over {limit // MiB} MiB (the most dfcompass reads of one): not read",
                         os.fspath(path))


def read_bounded(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of `path`, at most `limit` of them; more is :class:`TooLarge`."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(path, what, limit)
    return data


def read_text(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """The UTF-8 text of `path`, gunzipped when it is gzip (by content), at most `limit` bytes either way."""
    raw = read_bounded(path, limit, what)
    if raw[:2] == _GZIP_MAGIC:
        raw = _inflated(path, raw, limit, what)
    return raw.decode("utf-8")


def load_json(path: str | os.PathLike[str], limit: int, what: str) -> Any:
    """The JSON document of `path` (plain or gzip), bounded as :func:`read_text`."""
    text = read_text(path, limit, what)
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested deeper than dfcompass reads", text[:1000], 0) from None


def _inflated(path: str | os.PathLike[str], packed: bytes, limit: int, what: str) -> bytes:
    """Every gzip member of `packed` inflated, stopping one byte past `limit`."""
    out = bytearray()
    while packed:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out += inflater.decompress(packed, limit + 1 - len(out))
        except zlib.error as exc:
            raise OSError(errno.EINVAL, f"not a readable gzip file ({exc})", os.fspath(path)) from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise TooLarge(path, f"{what} (inflated)", limit)
        if not inflater.eof:
            raise OSError(errno.EINVAL, "a truncated gzip file", os.fspath(path))
        packed = inflater.unused_data
    return bytes(out)
