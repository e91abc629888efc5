"""The event catalogue: ids, layouts and the rules the CTF readers depend on."""

from __future__ import annotations

import struct
import uuid

import numpy as np
import pytest

from tc_analyses.errors import SchemaVersionError
from tc_analyses.reader.fast import DTYPES
from tc_analyses.reader.metadata import check_dfcompass, read_metadata
from tracer import schema
from tracer.ctf import TraceDirectory, records_per_packet
from tracer.tsdl import PACKET_PREAMBLE_SIZE, TraceMeta, render_metadata


def test_ids_are_dense_and_in_order() -> None:
    assert [c.id for c in schema.CATALOGUE] == list(range(len(schema.CATALOGUE)))
    assert schema.CATALOGUE[0] is schema.STRING_DEF


def test_names_are_unique_and_prefixed() -> None:
    names = [c.name for c in schema.CATALOGUE]
    assert len(set(names)) == len(names)
    assert all(n.startswith("dfc:") for n in names)
    assert schema.BY_NAME["dfc:node_begin"] is schema.BY_SHORT["node_begin"] is schema.BY_ID[6]


def test_only_string_def_is_variable_size() -> None:
    assert [c.name for c in schema.CATALOGUE if c.is_variable] == ["dfc:string_def"]
    assert schema.STRING_DEF.record_size == 0
    with pytest.raises(ValueError):
        schema.STRING_DEF.numpy_fields()


@pytest.mark.parametrize("cls", [c for c in schema.CATALOGUE if not c.is_variable], ids=lambda c: c.short)
def test_record_layout_matches_struct_and_numpy(cls: schema.EventClass) -> None:
    sizes = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "i64": 8, "sid": 4}
    expected = schema.HEADER_SIZE + sum(sizes[f.type] for f in cls.fields)
    assert schema.HEADER_SIZE == 10
    assert cls.record_size == expected == struct.calcsize("<" + cls.struct_format)
    assert DTYPES[cls.id].itemsize == expected
    assert DTYPES[cls.id].names == ("id", "timestamp") + cls.field_names
    # at least one record per packet, whatever the packet size
    assert records_per_packet(cls, 1) == 1
    assert records_per_packet(cls, PACKET_PREAMBLE_SIZE + 10 * expected) == 10


@pytest.mark.parametrize("cls", schema.CATALOGUE, ids=lambda c: c.short)
def test_field_rules(cls: schema.EventClass) -> None:
    for f in cls.fields:
        assert f.name.isidentifier() and not f.name.startswith("_"), f.name
        assert f.type in schema.FIELD_TYPES
        assert f.type != "u8", "Trace Compass sign-extends unsigned 8-bit values"
        assert f.doc
    assert len(set(cls.field_names)) == len(cls.field_names)


@pytest.mark.parametrize("name,type_", [("_hidden", "u32"), ("not an identifier", "u32"), ("x", "f64")])
def test_bad_fields_are_refused(name: str, type_: str) -> None:
    with pytest.raises(ValueError):
        schema.Field(name, type_, "doc")


def test_no_step_is_u32_max() -> None:
    assert schema.NO_STEP == 2**32 - 1
    assert np.array([schema.NO_STEP], dtype="<u4")[0] == schema.NO_STEP


def test_metadata_declares_every_class_with_its_fields(tmp_path) -> None:
    TraceDirectory(tmp_path / "t", clock_offset_ns=0, trace_uuid=uuid.UUID(int=1)).close()
    meta = read_metadata(tmp_path / "t")
    assert meta.events == {c.id: c.name for c in schema.CATALOGUE}
    assert meta.is_dfcompass
    assert (meta.env["dfcompass_schema_major"], meta.env["dfcompass_schema_minor"]) == schema.SCHEMA_VERSION
    for cls in schema.CATALOGUE:
        block = meta.text.split(f'name = "{cls.name}";', 1)[1].split("};\n};", 1)[0]
        declared = [line.split()[-1].rstrip(";") for line in block.splitlines() if line.startswith("\t\t")]
        assert declared == list(cls.field_names), cls.name


def test_reader_refuses_other_schema_major(tmp_path) -> None:
    meta_text = render_metadata(TraceMeta(uuid.UUID(int=2), 0))
    (tmp_path / "metadata").write_text(meta_text.replace("dfcompass_schema_major = 1;", "dfcompass_schema_major = 99;"))
    with pytest.raises(SchemaVersionError, match="schema 99"):
        check_dfcompass(read_metadata(tmp_path))


def test_reader_refuses_renamed_event_class(tmp_path) -> None:
    meta_text = render_metadata(TraceMeta(uuid.UUID(int=3), 0))
    (tmp_path / "metadata").write_text(meta_text.replace('name = "dfc:node_end";', 'name = "dfc:renamed";'))
    with pytest.raises(SchemaVersionError, match="dfc:renamed"):
        check_dfcompass(read_metadata(tmp_path))
