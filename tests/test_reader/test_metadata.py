"""Metadata parsing: plain text (ours) and packetized (LTTng's)."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import pytest

from tracer import schema

from tc_analyses.errors import TraceError
from tc_analyses.reader.metadata import find_traces, read_metadata
from tracer.tsdl import TraceMeta, render_metadata

TRACE_UUID = uuid.UUID("0badc0de-0000-4000-8000-000000000001")
_PACKET = struct.Struct("<I16sIIIBBBBB")  # the CTF metadata packet header (37 bytes)


def _packetize(text: str, chunk: int = 300) -> bytes:
    """The TSDL text split into CTF metadata packets, padded to whole bytes, as LTTng writes it."""
    data = text.encode()
    out = bytearray()
    for i in range(0, len(data), chunk):
        body = data[i : i + chunk]
        content = _PACKET.size + len(body)
        packet = content + 13  # some padding
        out += _PACKET.pack(0x75D11D57, TRACE_UUID.bytes, 0, content * 8, packet * 8, 0, 0, 0, 1, 8)
        out += body + b"\0" * 13
    return bytes(out)


def _text(env: dict[str, str | int] | None = None) -> str:
    return render_metadata(TraceMeta(TRACE_UUID, 1_234_567_890_123_456_789, hostname="h\"o\\st", env=env or {}))


def test_plain_text_metadata(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_text(_text({"extra": "a \"quoted\" \\ value", "n": 42}))
    meta = read_metadata(tmp_path)
    assert meta.uuid == str(TRACE_UUID)
    assert meta.clock_offset_ns == 1_234_567_890_123_456_789 and meta.clock_freq == 1_000_000_000
    assert meta.env["hostname"] == "h\"o\\st"
    assert meta.env["extra"] == "a \"quoted\" \\ value" and meta.env["n"] == 42
    assert meta.is_dfcompass


def test_packetized_metadata_with_signature(tmp_path: Path) -> None:
    (tmp_path / "metadata").write_bytes(_packetize(_text()))
    meta = read_metadata(tmp_path)
    assert meta.text == _text()
    assert meta.uuid == str(TRACE_UUID) and meta.is_dfcompass and len(meta.events) == len(schema.CATALOGUE)


def test_packetized_metadata_without_signature(tmp_path: Path) -> None:
    text = _text().replace("/* CTF 1.8 */\n", "", 1)
    (tmp_path / "metadata").write_bytes(_packetize(text))
    meta = read_metadata(tmp_path)
    assert meta.uuid == str(TRACE_UUID) and len(meta.events) == len(schema.CATALOGUE)


def test_bad_metadata_packet_header(tmp_path: Path) -> None:
    raw = bytearray(_packetize(_text()))
    second = _PACKET.size + 300 + 13
    raw[second + 28 : second + 32] = struct.pack("<I", 7)  # packet_size: 7 bits, less than its content
    (tmp_path / "metadata").write_bytes(bytes(raw))
    with pytest.raises(TraceError, match="bad metadata packet header") as caught:
        read_metadata(tmp_path)
    assert caught.value.offset == second


def test_missing_and_non_ctf_metadata(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="missing metadata") as caught:
        read_metadata(tmp_path)
    assert caught.value.path == str(tmp_path / "metadata")
    (tmp_path / "metadata").write_text("trace { };")
    with pytest.raises(TraceError, match="does not start with") as caught:
        read_metadata(tmp_path)
    assert caught.value.offset == 0


def test_find_traces(tmp_path: Path) -> None:
    for name in ("b/t2", "a/t1", "a/t1/nested"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "metadata").write_text(_text())
    assert find_traces(tmp_path / "a" / "t1") == [tmp_path / "a" / "t1"]
    assert find_traces(tmp_path) == [tmp_path / "a" / "t1", tmp_path / "a" / "t1" / "nested", tmp_path / "b" / "t2"]
    assert find_traces(tmp_path / "missing") == []


def test_shared_lttng_metadata(shared_dir: Path) -> None:
    for name, domain in (("ros2", "ust"), ("ust-tracef-local", "ust")):
        meta = read_metadata(shared_dir / "traces" / "lttng" / name)
        assert meta.env["domain"] == domain and not meta.is_dfcompass
        assert meta.clock_offset_ns > 0
