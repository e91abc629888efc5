"""The op observer's windows converted in C++: the same records as the Python conversion, 30x faster.

:mod:`tracer.torch_observer` walks a drained window into nodes and :mod:`tracer.torch_convert` writes
them with their exact edges, at about 60 us per op in Python: five times an op of the LSTM loop of
time_sequence_prediction (issue 35). ``tracer/native/window_convert.cpp`` runs the same rules over
the drained rows and packs the records itself. What it cannot know stays here, done once per name,
string or device, not per event: which op names are nodes, marks or scopes (the rules of
:mod:`tracer.torch_events`), which arguments an op's schema writes, the session's string ids,
device indexes and node, tensor and annotation ids.

tests/test_tracer/test_window_convert.py converts the same drained windows both ways and compares
the streams record for record.
"""

from __future__ import annotations

import ctypes
import weakref
from array import array
from typing import Any

from tracer import schema
from tracer.collectives import collective_kind
from tracer.session import Session
from tracer.torch_edges import FRESH_INPUT_OPS, _Writes
from tracer.torch_events import (_COMPILE_SCOPES, _COMPILED_CALL, _COMPILED_FUNCTIONS, _NODE_PREFIXES,
                                 _SPARSE_BUILDERS)
from tracer.torch_observer import (_DTYPES, ALLOC_COLUMNS, BEGIN_COLUMNS, END_COLUMNS, ObservedCut,
                                   device_name)
from tracer.torch_scopes import MODULE_MARK, THREAD_MARK

# Name flags, as window_convert.cpp reads them.
_NODE, _MODULE_MARK, _THREAD_MARK, _COMPILE_SCOPE, _COMPILED_CALL_FLAG = 1, 2, 4, 8, 16
_COMPILED_FUNCTION, _SPARSE_BUILDER, _FRESH_INPUT, _SET_STORAGE, _HASH_SCOPE, _COLLECTIVE = 32, 64, 128, 256, 512, 1024
# Field kinds: what emit patches in.
_PLAIN, _STRING, _DEVICE, _NODE_ID, _TENSOR_ID, _ANNOTATION_ID = range(6)
_ID_FIELDS = {"node_id": _NODE_ID, "producer": _NODE_ID, "consumer": _NODE_ID, "tensor_id": _TENSOR_ID,
              "annotation_id": _ANNOTATION_ID}
_CLASSES = ("node_begin", "node_args", "node_end", "tensor_edge", "collective", "mem_alloc", "mem_free",
            "annotation_begin", "annotation_end")

_I64 = ctypes.c_int64
_P64 = ctypes.POINTER(ctypes.c_int64)


def name_flags(name: str) -> tuple[int, str, str]:
    """How the conversion treats an op name: its flags, the text they need (a module mark's scope, a
    compiled graph's key), and its collective kind."""
    flags, extra = 0, ""
    if name in _COMPILE_SCOPES:
        flags |= _COMPILE_SCOPE
    if name.startswith(_COMPILED_CALL):
        flags |= _COMPILED_CALL_FLAG
        extra = name[len(_COMPILED_CALL):].rstrip("# ")[:12]
    if name in _COMPILED_FUNCTIONS:
        flags |= _COMPILED_FUNCTION
    if name.startswith(MODULE_MARK):
        flags |= _MODULE_MARK
        extra = name[len(MODULE_MARK):]
    if name.startswith(THREAD_MARK):
        flags |= _THREAD_MARK
    if name.startswith(_NODE_PREFIXES):
        flags |= _NODE
    if name.startswith("##"):
        flags |= _HASH_SCOPE
    if name in _SPARSE_BUILDERS:
        flags |= _SPARSE_BUILDER
    if name in FRESH_INPUT_OPS:
        flags |= _FRESH_INPUT
    if name == "aten::set_":
        flags |= _SET_STORAGE
    kind = collective_kind(name)
    if kind is not None:
        flags |= _COLLECTIVE
    return flags, extra, kind or ""


def _pointer(values: array) -> Any:
    """An int64 array's buffer for C (kept alive by the caller)."""
    if not values:
        return None
    address, _ = values.buffer_info()
    return ctypes.cast(address, _P64)


class NativeWindowConverter:
    """One recording's conversion state, in C++: what outlives a window (open ops, each live
    storage's last writer, forward scopes) lives there, freed with this object (or by ``close()``)."""

    def __init__(self, library: ctypes.CDLL, torch: Any) -> None:
        # Two views of one library: ctypes lets go of the GIL around each call of a CDLL, which pays
        # for the three calls that convert (collect, write, emit: the program runs meanwhile) and
        # costs a GIL hand-over for each small one, so those go through a PyDLL, which keeps it.
        self._heavy = library
        self._lib = lib = ctypes.PyDLL(library._name)
        lib.dfc_convert_new.restype = ctypes.c_void_p
        lib.dfc_convert_used_string.restype = ctypes.c_char_p
        lib.dfc_convert_stream.restype = ctypes.c_void_p
        library.dfc_convert_collect.restype = library.dfc_convert_emit.restype = ctypes.c_int64
        lib.dfc_convert_handles.restype = ctypes.c_int64
        handle = lib.dfc_convert_new()
        if not handle:
            raise MemoryError("the window converter could not be made")
        self._c = ctypes.c_void_p(handle)
        self.close = weakref.finalize(self, lib.dfc_convert_free, self._c)  # its C++ state goes with it
        self.close.atexit = False  # at exit the last window may still convert after the finalizers run
        self._writes = _Writes(torch)
        self._names: list[str] = []
        self._sids = array("q")     # per string handle: its sid (for those used so far)
        self._devices = array("q")  # per device handle: its index in the trace
        for short in _CLASSES:
            cls = schema.BY_SHORT[short]
            sizes = array("q", [schema.FIELD_TYPES[f.type][1] for f in cls.fields])
            kinds = array("q", [_STRING if f.type == "sid" else _DEVICE if f.name in schema.DEVICE_FIELDS
                                else _ID_FIELDS.get(f.name, _PLAIN) for f in cls.fields])
            self._check(lib.dfc_convert_class(self._c, _I64(cls.id), _I64(len(sizes)), _pointer(sizes),
                                                  _pointer(kinds)))
        for code, name in enumerate(_DTYPES):
            dtype = getattr(torch, name, torch.uint8)
            self._check(lib.dfc_convert_dtype(self._c, _I64(code), _I64(dtype.itemsize),
                                                  str(dtype).removeprefix("torch.").encode()))

    @staticmethod
    def _check(status: int) -> None:
        if status < 0:
            raise RuntimeError("the window converter failed (C++ exception)")

    def _learn_names(self, names: list[str]) -> None:
        for name in names[len(self._names):]:
            flags, extra, kind = name_flags(name)
            self._check(self._lib.dfc_convert_name(self._c, name.encode("utf-8", "replace"), _I64(flags),
                                                   extra.encode("utf-8", "replace"), kind.encode()))
            self._names.append(name)

    def convert(self, cut: ObservedCut, session: Session, floor: int, offset: int,
                steps: list[tuple[int, int, int, int]], rank: tuple[int, int] | None, memory: bool) -> tuple[int, int]:
        """Write one drained window into `session`'s trace; (nodes, edges) written. `steps`: the
        user's step windows (begin, end, step, tid), `offset`: the trace clock to the observer's."""
        lib, heavy, c = self._lib, self._heavy, self._c
        self._learn_names(cut.names)
        window = cut.window
        flat_steps = array("q", [value for begin, end, step, _ in steps for value in (begin, end, step)])
        missing = heavy.dfc_convert_collect(
            c, _pointer(window.begins), _I64(len(window.begins) // BEGIN_COLUMNS), _pointer(window.ends),
            _I64(len(window.ends) // END_COLUMNS), _pointer(window.values), _pointer(window.sizes),
            _pointer(window.allocs), _I64(len(window.allocs) // ALLOC_COLUMNS), _pointer(flat_steps), _I64(len(steps)))
        self._check(missing)
        key = (ctypes.c_int64 * 3)()
        for index in range(missing):  # the written arguments of ops new to this recording
            lib.dfc_convert_missing(c, _I64(index), key)
            op, overload, arity = key[0], key[1], key[2]
            written = array("q", self._writes(self._names[op], self._names[overload] if overload >= 0 else "", arity))
            self._check(lib.dfc_convert_written(c, _I64(op), _I64(overload), _I64(arity), _I64(len(written)),
                                                _pointer(written)))
        counts = (ctypes.c_int64 * 7)()
        rank_value, world = rank if rank is not None else (0xFFFFFFFF, 0)
        self._check(heavy.dfc_convert_write(c, _I64(rank_value), _I64(world), _I64(int(memory)), _I64(floor),
                                          _I64(offset), counts))
        nodes, node_ids, tensor_ids, annotation_ids, edges, strings, devices = counts
        assert session.trace is not None
        for thread, definitions in sorted(self._strings(session, strings).items()):  # per thread (Batch's rule)
            session.trace.write_events(schema.STRING_DEF, f"torch-{thread}", definitions)
        self._describe_devices(session, devices)
        numbered = [session.take_ids(kind, count) for kind, count in (
            ("node", node_ids), ("tensor", tensor_ids), ("annotation", annotation_ids))]
        streams = heavy.dfc_convert_emit(c, *[_pointer(ids) for ids in numbered], _pointer(self._sids),
                                       _pointer(self._devices))
        self._check(streams)
        cls_id, tid, count, nbytes = _I64(), _I64(), _I64(), _I64()
        ts_pointer = _P64()
        for index in range(streams):
            records = lib.dfc_convert_stream(c, _I64(index), ctypes.byref(cls_id), ctypes.byref(tid),
                                             ctypes.byref(count), ctypes.byref(ts_pointer), ctypes.byref(nbytes))
            # The times as a C array: no int object per event (write_block reads one per packet).
            ts = ctypes.cast(ts_pointer, ctypes.POINTER(ctypes.c_int64 * count.value)).contents
            session.trace.write_block(schema.BY_ID[cls_id.value], f"torch-{tid.value}", ts,  # type: ignore[arg-type]
                                      ctypes.string_at(records, nbytes.value))
        return nodes, edges

    def _strings(self, session: Session, used: int) -> dict[int, list[tuple[int, int, str]]]:
        """The sid of each string the window used; the definitions it must write, by the thread of the
        string's first use (tracer.batch.Batch's rule)."""
        total = self._lib.dfc_convert_handles(self._c, _I64(0))
        if len(self._sids) < total:
            self._sids.extend([-1] * (total - len(self._sids)))
        handle, define_at, tid = _I64(), _I64(), _I64()
        definitions: dict[int, list[tuple[int, int, str]]] = {}
        for index in range(used):
            text = self._lib.dfc_convert_used_string(self._c, _I64(index), ctypes.byref(handle), ctypes.byref(define_at),
                                                     ctypes.byref(tid)).decode("utf-8", "replace")
            sid, needs_definition = session.intern_at(text, define_at.value)
            self._sids[handle.value] = sid
            if needs_definition:
                definitions.setdefault(tid.value, []).append((define_at.value, sid, text))
        return definitions

    def _describe_devices(self, session: Session, used: int) -> None:
        total = self._lib.dfc_convert_handles(self._c, _I64(1))
        if len(self._devices) < total:
            self._devices.extend([0] * (total - len(self._devices)))
        handle, kind, index = _I64(), _I64(), _I64()
        for at in range(used):
            self._lib.dfc_convert_used_device(self._c, _I64(at), ctypes.byref(handle), ctypes.byref(kind),
                                              ctypes.byref(index))
            self._devices[handle.value] = session.device(device_name(kind.value, index.value))
