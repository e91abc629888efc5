"""A trace's activity as Parquet: the columnar intermediate written once per trace and read back
by every later analysis and run (:class:`tc_analyses.inputs.TraceInputs` with a cache folder).

One folder per trace, ``<cache>/<trace folder name>-<fingerprint>/``. The fingerprint hashes the
trace's stream files (names, sizes, modification times) and this format's version, so a trace
that is recorded or converted again gets a new folder and a stale one is never read. The folder
holds one Parquet file per table (``nodes``, ``api``, ``gpu``, ``annotations``, ``syncs``,
``steps``, ``devices``), each the table's own columns with text dictionary-encoded, and
``meta.json`` (the activity's span, unpaired count, path and each file's sha256, checked before a
read: an entry changed since it was written is a miss): any Parquet reader opens them. A cache
folder or entry that is a symbolic link is never used.

Examples
--------
>>> import tempfile
>>> from tc_analyses.model.activity import Activity, NodeRun
>>> act = Activity("t", [NodeRun(1, "aten::mm", "mm", "cpu", 7, 0, 10, 20, True)], [], [], [], {})
>>> with tempfile.TemporaryDirectory() as tmp:
...     write_activity(act, Path(tmp) / "a")
...     back = read_activity_file(Path(tmp) / "a")
>>> list(back.nodes) == list(act.nodes)
True
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tc_analyses.errors import TraceError
from tc_analyses.model.activity import (Activity, AnnotationTable, ApiTable, Device, GpuTable, NodeTable, StepRun,
                                        SyncTable)
from tc_analyses.model.tables import RunTable

FORMAT_VERSION = 2  # 2: meta.json holds each file's sha256


def _umask() -> int:
    mask = os.umask(0)  # read once, at import: umask() is process-wide, so not from worker threads
    os.umask(mask)
    return mask


_UMASK = _umask()
_TABLES: dict[str, type[RunTable[Any]]] = {"nodes": NodeTable, "api": ApiTable, "gpu": GpuTable,
                                           "annotations": AnnotationTable, "syncs": SyncTable}


def fingerprint(trace: Path) -> str:
    """A short hash of the trace's files (name, size, modification time) and of this format."""
    digest = hashlib.sha256(f"dfcompass-activity-{FORMAT_VERSION}".encode())
    for path in sorted(p for p in trace.iterdir() if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cache_file(cache: Path, trace: Path) -> Path:
    """Where the activity of `trace` is kept in the folder `cache`. OSError when the folder or the
    entry is a symbolic link: a cache is never followed out of where it was asked to be (a link
    planted in a shared job folder would read and write elsewhere)."""
    entry = cache / f"{trace.name}-{fingerprint(trace)}"
    for path in (cache, entry):
        if path.is_symlink():
            raise OSError(errno.ELOOP, "a symbolic link: the activity cache does not follow links", str(path))
    return entry


def _digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _arrow(table: RunTable[Any]) -> pa.Table:
    arrays, names = [], []
    for name in table.row.__dataclass_fields__:  # type: ignore[attr-defined]
        codes = table.column(name)
        if name in table.texts:
            labels = table.labels(name) if len(table) else np.zeros(0, dtype=object)
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                                         pa.array(labels.tolist(), pa.string())))
        else:
            arrays.append(pa.array(codes, pa.int64()))
        names.append(name)
    return pa.table(arrays, names=names)


def _table(cls: type[RunTable[Any]], arrow: pa.Table) -> RunTable[Any]:
    columns: dict[str, np.ndarray[Any, Any]] = {}
    labels: dict[str, np.ndarray[Any, Any]] = {}
    for name in arrow.column_names:
        column = arrow.column(name).combine_chunks()
        if name in cls.texts:
            if not isinstance(column, pa.DictionaryArray):
                column = column.dictionary_encode()
            columns[name] = column.indices.to_numpy(zero_copy_only=False).astype(np.int32)
            labels[name] = np.array(column.dictionary.to_pylist(), dtype=object)
        else:
            columns[name] = column.to_numpy().astype(np.int64)
    return cls(columns, labels)


def write_activity(activity: Activity, folder: Path) -> None:
    """Write `activity` as a folder of Parquet files, one per table, and ``meta.json``. The folder
    is made under a temporary name and renamed into place: a reader never sees half of it."""
    parts = {key: _arrow(getattr(activity, key)) for key in _TABLES}
    parts["steps"] = pa.table({k: pa.array([getattr(s, k) for s in activity.steps], pa.int64())
                               for k in ("step", "tid", "start", "end")})
    parts["devices"] = pa.table({"index": pa.array([d.index for d in activity.devices.values()], pa.int64()),
                                 **{k: pa.array([getattr(d, k) for d in activity.devices.values()], pa.string())
                                    for k in ("name", "kind", "model")}})
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "path": activity.path, "span": list(activity.span),
                            "unpaired": activity.unpaired, "rows": {key: len(t) for key, t in parts.items()}}
    folder.parent.mkdir(parents=True, exist_ok=True)
    # a scratch folder of its own: other threads, processes or hosts may write the same entry
    scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    os.chmod(scratch, 0o777 & ~_UMASK)  # mkdtemp's 0700 would keep the entry from the job's other users
    try:
        for key, table in parts.items():
            pq.write_table(table, scratch / f"{key}.parquet", compression="zstd")
        # what was written, so that an entry changed since (by hand, or half-copied) is not read
        meta["sha256"] = {key: _digest(scratch / f"{key}.parquet") for key in parts}
        (scratch / "meta.json").write_text(json.dumps(meta) + "\n")
        try:
            os.replace(scratch, folder)
        except OSError:  # another writer was first (theirs is the same activity), or a damaged entry
            try:
                read_activity_file(folder)
            except TraceError:
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_activity_file(folder: Path) -> Activity:
    """The activity written by :func:`write_activity`; TraceError naming the folder when it is damaged."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"format {meta.get('format')}, expected {FORMAT_VERSION}")
        keys = (*_TABLES, "steps", "devices")
        digests = meta.get("sha256")
        changed = [key for key in keys if not isinstance(digests, dict)
                   or digests.get(key) != _digest(folder / f"{key}.parquet")]
        if changed:
            raise ValueError(f"{', '.join(changed)}.parquet changed since it was written (its sha256 differs)")
        parts = {key: pq.read_table(folder / f"{key}.parquet") for key in keys}
        tables = {key: _table(cls, parts[key]) for key, cls in _TABLES.items()}
        steps = [StepRun(*row) for row in zip(*(parts["steps"].column(k).to_pylist()
                                                for k in ("step", "tid", "start", "end")))]
        devices = {i: Device(i, n, k, m) for i, n, k, m in zip(*(parts["devices"].column(c).to_pylist()
                                                               for c in ("index", "name", "kind", "model")))}
        return Activity(str(meta["path"]), tables["nodes"], steps, tables["api"],  # type: ignore[arg-type]
                        tables["gpu"], devices, int(meta["unpaired"]),  # type: ignore[arg-type]
                        (int(meta["span"][0]), int(meta["span"][1])),
                        tables["annotations"], tables["syncs"])  # type: ignore[arg-type]
    except (OSError, ValueError, KeyError, TypeError, IndexError, pa.ArrowException) as exc:
        raise TraceError(folder, f"not a dfcompass activity folder ({type(exc).__name__}: {exc})") from exc
