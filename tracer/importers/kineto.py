"""Convert a Kineto (PyTorch profiler) Chrome-trace JSON file into a dfcompass trace.

The mapping is documented in ``docs/import-kineto.md``. In short: ``cpu_op`` slices become
nodes, ``ProfilerStep#N`` slices steps, ``cuda_runtime``/``cuda_driver`` slices API calls,
``kernel``/``gpu_memcpy``/``gpu_memset`` slices GPU activities and ``[memory]`` instants
allocations and frees. Anything else is counted as skipped, never dropped silently. The whole
file is checked before the output directory is touched.

>>> import_kineto(Path("trace.json.gz"), Path("out/trace"))  # doctest: +SKIP
ImportSummary(...)
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Any, Callable

from tracer import schema
from tracer.builder import TraceBuilder
from tracer.ctf import TraceExistsError
from tracer.importers.kineto_convert import Converter
from tracer.importers.kineto_decode import NotFast
from tracer.importers.kineto_emit import ColumnConverter
from tracer.importers.kineto_source import KinetoFile, KinetoImportError, as_int
from tracer.importers.kineto_summary import NO_TENSOR_EDGES, ImportSummary, wall_clock_origin

_IMPORT_NAMESPACE = uuid.UUID("5b0f5a4e-6d1c-4f1e-9a51-dfc0a1b2c3d4")  # dfcompass imports
MARGIN_NS = 1_000  # the first event lands here, leaving room for definitions stamped before it


def _device_order(name: str) -> tuple[int, str, int]:
    kind, _, ordinal = name.partition(":")
    return (kind != "cpu", kind, int(ordinal) if ordinal.isdigit() else 0)


def _models(doc: dict[str, Any]) -> dict[str, str]:
    """GPU models from Kineto's deviceProperties: {"cuda:0": "NVIDIA A100-..."}."""
    props = doc.get("deviceProperties")
    models = {}
    for entry in props if isinstance(props, list) else []:
        ordinal = as_int(entry.get("id")) if isinstance(entry, dict) else None
        if ordinal is not None and isinstance(entry.get("name"), str):
            models[f"cuda:{ordinal}"] = entry["name"]
    return models


def _env(doc: dict[str, Any], src: Path) -> dict[str, str | int]:
    env: dict[str, str | int] = {"import_format": "kineto", "import_file": src.name[:200]}
    info = doc.get("distributedInfo")
    rank = as_int(info.get("rank")) if isinstance(info, dict) else None
    if rank is not None:
        env["kineto_rank"] = rank
    world = as_int(info.get("world_size")) if isinstance(info, dict) else None
    if world is not None and 0 < world < 2**31:
        env["kineto_world_size"] = world
    return env


def content_uuid(src: Path) -> uuid.UUID:
    """A UUID derived from the bytes of `src`: importing one file twice gives one UUID."""
    digest = hashlib.sha256()
    with open(src, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return uuid.uuid5(_IMPORT_NAMESPACE, "kineto:" + digest.hexdigest())


def _rebase(first: int, base: int) -> tuple[int, int]:
    """(clock offset, shift) with trace time = Kineto ns - shift, the first event at MARGIN_NS.

    offset + trace time is then base + Kineto ns, the wall time, unless that would be negative
    (only for odd hand-made files): babeltrace2 wants unsigned times and a non-negative offset.
    """
    first_wall = base + first
    if first_wall < 0:
        return 0, first - MARGIN_NS
    offset = max(first_wall - MARGIN_NS, 0)
    return offset, offset - base


def import_kineto(src: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  overwrite: bool = False, advance: Callable[[int], None] | None = None,
                  checked: bool = False, ctf_version: str | None = None) -> ImportSummary:
    """Convert the Kineto file `src` (.json or .json.gz) into a dfcompass trace directory `out`.

    Raises :class:`KinetoImportError` for a file that is not a usable Kineto trace,
    :class:`~tracer.ctf.TraceExistsError` when `out` holds a trace and not `overwrite`, and
    OSError when a file cannot be read or written. Nothing is written unless the file converts.
    `advance(n)` is told the bytes of `src` each read takes: two reads of the whole file, three when
    some call or activity needs the ac2g flows for its correlation id (for a progress bar).
    `checked`: skip the fast path (columns) and convert event by event; both give the same bytes.
    `ctf_version`: the trace's CTF ("1.8", "2"; None: $DFCOMPASS_CTF, else 1.8).
    """
    src, out = Path(src), Path(out)
    if (out / "metadata").exists() and not overwrite:
        raise TraceExistsError(f"{out}: already holds a trace (use --overwrite to replace it)")
    conv = _scanned(src, advance, checked)  # the whole file is read and checked before anything is converted
    if conv.first is None or conv.last is None:
        raise KinetoImportError(src, f"nothing to import: none of the {conv.source_events} events is a cpu_op, "
                                "runtime call, GPU activity, user annotation or [memory] event")
    origin, base = wall_clock_origin(conv.doc, conv.first)
    offset, shift = _rebase(conv.first, base)
    models = _models(conv.doc)
    # The same file always gives the same trace UUID; a clock with a wall-time origin is absolute,
    # so the ranks of one job imported one by one still open together in babeltrace2. Nothing is
    # written to `out` before the builder closes: a conversion error leaves no trace behind.
    env = _env(conv.doc, src)
    if origin == "baseTimeNanoseconds":
        env["kineto_base_ns"] = base  # what the file's ts count from: readers that redo its µs need it
    builder = TraceBuilder(out, clock_offset_ns=offset, env=env, overwrite=overwrite,
                           trace_uuid=content_uuid(src), absolute_clock=origin != "unknown",
                           device_order=_device_order, scratch_dir=_existing_parent(out), ctf_version=ctf_version)
    try:
        if isinstance(conv, ColumnConverter):
            conv.convert(builder, shift, models, _device_order)
        else:
            conv.convert(builder, shift, models)
        gpu_events = len(conv.gpu_corr) + conv.gpu_without_corr
        if conv.gpu_skipped and not gpu_events:
            raise KinetoImportError(src, f"{_gpu_skipped(conv.gpu_skipped)}, and no GPU activity of a kind it "
                                    "reads: the import would have no GPU side")
        builder.close()
    finally:
        builder.discard()
    devices = sorted(conv.first_use, key=_device_order)  # cpu first, then GPUs by ordinal
    notes = [NO_TENSOR_EDGES]
    if conv.gpu_skipped:
        notes.insert(0, f"{_gpu_skipped(conv.gpu_skipped)}: the GPU side is incomplete")
    return ImportSummary(
        source=str(src), output=str(out), source_events=conv.source_events,
        events_per_class=dict(sorted(builder.events_written().items(), key=lambda kv: schema.BY_NAME[kv[0]].id)),
        skipped=dict(sorted(conv.skipped.items())),
        devices={name: models.get(name, "") for name in devices},
        gpu_streams={d: sorted(conv.gpu_streams[d]) for d in devices if d in conv.gpu_streams},
        threads=len(conv.first_thread),
        steps=sorted(conv.step_numbers),
        remapped_ids={k: m.remapped for k, m in (("tid", conv.tids), ("pid", conv.pids), ("stream", conv.streams))
                      if m.remapped},
        correlation={"gpu_with_launch": conv.with_launch, "gpu_without_launch": gpu_events - conv.with_launch,
                     "api_joined_by_flow": conv.joined["api"], "gpu_joined_by_flow": conv.joined["gpu"],
                     "ac2g_flow_events": conv.ac2g},
        clock_origin=origin, clock_offset_ns=offset,
        first_ns=offset + conv.first - shift, last_ns=offset + conv.last - shift, notes=notes,
    )


def _gpu_skipped(skipped: dict[str, int]) -> str:
    """One phrase on the GPU work an import skipped: slices with a device and a stream whose
    category no dfcompass class takes."""
    kinds = ", ".join(f"{n:,} {category!r}" for category, n in sorted(skipped.items()))
    return f"{sum(skipped.values()):,} GPU slices were not imported (no dfcompass class takes their category): {kinds}"


def _scanned(src: Path, advance: Callable[[int], None] | None, checked: bool) -> ColumnConverter | Converter:
    """The file read once and checked: by columns (the fast path), or, for a file that path
    declines (odd ids, flows to join, anything it cannot prove, every error), by the checked
    per-event path, which reads it twice (three times when flows must give correlation ids)."""
    reported = _Reported(advance)
    if not checked:
        fast = ColumnConverter(src, reported if advance is not None else None)
        try:
            fast.scan()
            return fast
        except NotFast:
            reported.rewind()  # the bar does not count the declined read twice
    conv = Converter(KinetoFile(src, reported if advance is not None else None))
    conv.scan()
    return conv


class _Reported:
    """Passes progress on; after :meth:`rewind`, holds back as many bytes as were passed."""

    def __init__(self, advance: Callable[[int], None] | None) -> None:
        self._advance, self._passed, self._held = advance, 0, 0

    def __call__(self, n: int) -> None:
        if self._held:
            taken = min(n, self._held)
            self._held -= taken
            n -= taken
        if n and self._advance is not None:
            self._passed += n
            self._advance(n)

    def rewind(self) -> None:
        self._held, self._passed = self._passed, 0


def _existing_parent(out: Path) -> Path | None:
    """The nearest existing folder above `out`: spilled records stay on the output's file system."""
    for folder in out.absolute().parents:
        if folder.is_dir():
            return folder
    return None
