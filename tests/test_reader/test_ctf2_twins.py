"""A dfcompass trace written as CTF 2 is its CTF 1.8 twin in every reader and analysis: the committed
traces, each given CTF 2 metadata (the streams are the same bytes), read by the numpy reader and by
the general CTF reader, and analysed (`analyze --format json`), give the same results; a folder
mixing the two versions (an experiment) is read as one."""

from __future__ import annotations

import json
import re
import shutil
import uuid as uuid_mod
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from tc_analyses.reader.ctf import iter_ctf
from tc_analyses.reader.fast import read_trace
from tc_analyses.reader.records import Event
from tc_analyses.reader.metadata import read_metadata
from tracer.ctf2_metadata import RECORD_SEPARATOR, render_json_metadata
from tests.test_reader.test_ctf2_reader import write_trace
from tracer.tsdl import RESERVED_ENV_KEYS, TraceMeta

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
TRACES = ["succeed/all-classes", "cuda/h200-mlp/trace", "tf/keras-cnn", "jobs/ddp-2rank/vm-18735",
          "cuda/h200-dataloader-job/vm-555"]


def ctf2_twin(src: Path, dst: Path) -> Path:
    """`src` with its metadata written as CTF 2 by dfcompass's writer (the streams copied as they are)."""
    meta = read_metadata(src)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".dfcompass-cache"))
    absolute = re.search(r"absolute\s*=\s*true", meta.text) is not None
    env = {k: v for k, v in meta.env.items() if k not in RESERVED_ENV_KEYS}
    twin = TraceMeta(uuid_mod.UUID(meta.uuid), meta.clock_offset_ns, hostname=str(meta.env.get("hostname", "")),
                     absolute=absolute, env=env)
    (dst / "metadata").write_text(render_json_metadata(twin), encoding="utf-8")
    return dst


def _records(path: Path) -> list[Any]:
    return [(r.__class__.__name__, *(getattr(r, f) if f != "stream" else Path(getattr(r, f)).name
                                      for f in r.__slots__)) for r in iter_ctf(str(path))]


@pytest.mark.parametrize("name", TRACES)
def test_a_ctf2_twin_reads_the_same(tmp_path: Path, name: str) -> None:
    src = DATA / name
    twin = ctf2_twin(src, tmp_path / "twin")
    assert (twin / "metadata").read_bytes()[:1] == RECORD_SEPARATOR.encode()
    ours, theirs = read_trace(src), read_trace(twin)
    assert theirs.metadata.ctf_version == "2" and ours.metadata.ctf_version == "1.8"
    assert (theirs.metadata.env, theirs.metadata.clock_offset_ns, theirs.metadata.uuid, theirs.metadata.events) == (
        ours.metadata.env, ours.metadata.clock_offset_ns, ours.metadata.uuid, ours.metadata.events)
    assert ours.tables.keys() == theirs.tables.keys() and ours.discarded == theirs.discarded
    for key, table in ours.tables.items():
        assert np.array_equal(table.records, theirs.tables[key].records), key
    assert list(ours.strings) == list(theirs.strings)
    assert _records(src) == _records(twin)  # the general reader: TSDL and JSON metadata, one decoder


@pytest.mark.parametrize("name", ["succeed/all-classes", "tf/keras-cnn"])
def test_a_ctf2_twin_analyses_the_same(tmp_path: Path, cli: Callable[..., Any], name: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(DATA / name, src, ignore=shutil.ignore_patterns(".dfcompass-cache"))
    twin = ctf2_twin(src, tmp_path / "twin")
    documents = []
    for path in (src, twin):
        result = cli("analyze", path, "--format", "json")
        assert result.exit_code == 0, result.stderr
        documents.append(json.loads(result.stdout.replace(str(path), "TRACE")))
    assert documents[0] == documents[1]


def test_an_experiment_mixes_ctf2_and_ctf18(tmp_path: Path, cli: Callable[..., Any]) -> None:
    """A folder of traces of both versions (a CTF 2 trace beside a 1.8 one) is read as one."""
    folder = tmp_path / "experiment"
    folder.mkdir()
    shutil.copytree(DATA / "jobs/ddp-2rank/vm-18735", folder / "rank0")
    ctf2_twin(DATA / "jobs/ddp-2rank/vm-18736", folder / "rank1")
    write_trace(folder / "other")  # a CTF 2 trace of another tracer (every field class kind)
    merged = list(iter_ctf(str(folder)))
    separately = sum(len(list(iter_ctf(str(folder / name)))) for name in ("rank0", "rank1", "other"))
    assert len(merged) == separately
    times = [r.ns_from_origin for r in merged if r.ns_from_origin is not None]
    assert times == sorted(times)
    assert {Path(r.stream).parent.name for r in merged} == {"rank0", "rank1", "other"}
    result = cli("info", "--format", "json", folder)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["events"], summary["discarded"]) == (sum(1 for r in merged if isinstance(r, Event)), 6)


def test_build_analyses_writes_the_same_for_a_ctf2_twin(tmp_path: Path, cli: Callable[..., Any]) -> None:
    src = DATA / "succeed/all-classes"
    twin = ctf2_twin(src, tmp_path / "v2" / src.name)  # the trace's name is in the analyses' labels
    written = {}
    for name, path in (("src", src), ("twin", twin)):
        result = cli("build-analyses", path, "-o", tmp_path / name)
        assert result.exit_code == 0, result.stderr
        written[name] = {p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*.xml")}
    assert written["src"] and written["src"] == written["twin"]
