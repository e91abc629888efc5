"""Recording API for hand-written dataflow pipelines: exact producer-to-consumer edges.

A node execution declares the objects it reads (``inputs``) and the objects it makes
(``outputs``). Edges come from object identity, not from execution order: when a node reads
an object some earlier node declared as output, a ``dfc:tensor_edge`` links the two.

Identity is tracked with weak references where the object allows it (numpy arrays, torch
tensors, most user classes), so a freed object never links to a later one that reuses its
``id()``. Objects that cannot be weakly referenced (tuples, ints...) are kept alive in a
bounded FIFO of the most recent ``STRONG_LIMIT`` outputs.

Everything here is a cheap no-op when no session is recording.

>>> import tracer
>>> @tracer.traced(op="scale")
... def scale(x):
...     return [v * 2 for v in x]
>>> scale([1, 2])  # no session: the function just runs
[2, 4]
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Iterable, TypeVar

from tracer import schema
from tracer import session as _session

STRONG_LIMIT = 4096
F = TypeVar("F", bound=Callable[..., Any])


class _Produced:
    __slots__ = ("tensor_id", "producer", "device", "nbytes", "ref")

    def __init__(self, tensor_id: int, producer: int, device: int, nbytes: int, ref: Any) -> None:
        self.tensor_id = tensor_id
        self.producer = producer
        self.device = device
        self.nbytes = nbytes
        self.ref = ref  # a weakref.ref, or the object itself when it cannot be weakly referenced


class _Producers:
    """id(obj) -> who produced obj, for one session."""

    def __init__(self) -> None:
        self.by_id: dict[int, _Produced] = {}
        self.strong: OrderedDict[int, None] = OrderedDict()
        self.lock = threading.Lock()
        self._sweep_at = 1024

    def lookup(self, obj: Any) -> _Produced | None:
        entry = self.by_id.get(id(obj))
        if entry is None:
            return None
        ref = entry.ref
        target = ref() if type(ref) is weakref.ref else ref
        return entry if target is obj else None

    def record(self, obj: Any, tensor_id: int, producer: int, device: int, nbytes: int) -> None:
        key = id(obj)
        try:
            # No callback: CPython then shares one ref object per target, which is much cheaper.
            # A dead ref never matches (lookup checks identity); sweeps drop them in bulk.
            ref: Any = weakref.ref(obj)
        except TypeError:
            ref = obj
            with self.lock:
                self.strong[key] = None
                self.strong.move_to_end(key)
                while len(self.strong) > STRONG_LIMIT:
                    old, _ = self.strong.popitem(last=False)
                    self.by_id.pop(old, None)
        self.by_id[key] = _Produced(tensor_id, producer, device, nbytes, ref)
        if len(self.by_id) >= self._sweep_at:
            self._sweep()

    def _sweep(self) -> None:
        dead = [k for k, e in list(self.by_id.items()) if type(e.ref) is weakref.ref and e.ref() is None]
        for key in dead:
            self.by_id.pop(key, None)
        self._sweep_at = max(1024, 2 * len(self.by_id))


def _producers_of(session: _session.Session) -> _Producers:
    found = session.dataflow
    if found is None:
        found = session.dataflow = _Producers()
    return found


def nbytes_of(obj: Any) -> int:
    """Size in bytes of a tensor-like object, or 0 (unknown)."""
    size = getattr(obj, "nbytes", None)
    if isinstance(size, int):
        return size
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, memoryview):
        return obj.nbytes
    return schema.UNKNOWN_BYTES


class node:
    """Mark one execution of a dataflow node.

    Use as a context manager::

        with tracer.node("decode", op="jpeg_decode", inputs=[raw]) as n:
            image = decode(raw)
            n.output(image)

    Parameters
    ----------
    name : node name (what the user calls this node).
    op : operation type; defaults to `name`.
    device : device name, e.g. "cpu" or "cuda:0".
    inputs : objects read by this execution; each one produced by an earlier traced node
        gives a tensor edge.
    outputs : objects made by this execution (more can be added with :meth:`output`).
    """

    __slots__ = ("_session", "_name", "_op", "_device_name", "_inputs", "_outputs", "node_id", "device")

    def __init__(
        self,
        name: str,
        op: str | None = None,
        *,
        device: str = "cpu",
        inputs: Iterable[Any] = (),
        outputs: Iterable[Any] = (),
    ) -> None:
        self._session = _session._active
        self._name = name
        self._op = op if op is not None else name
        self._device_name = device
        self._inputs = inputs
        self._outputs: list[Any] = list(outputs) if outputs else []
        self.node_id = -1
        self.device = 0

    def __enter__(self) -> "node":
        session = self._session
        if session is None or not session.active:
            return self
        key = (self._op, self._name, self._device_name)
        ids = session.node_keys.get(key)
        if ids is None:
            ids = session.node_keys[key] = (session.intern(self._op), session.intern(self._name),
                                            session.device(self._device_name))
        op_sid, name_sid, device = ids
        self.device = device
        self.node_id = session.node_begin(op_sid, name_sid, device)
        if self._inputs:
            _record_inputs(session, self.node_id, device, self._inputs)
        return self

    def output(self, *objects: Any) -> None:
        """Declare objects this execution produced (also allowed after the block ends)."""
        if self.node_id < 0:
            return
        self._outputs.extend(objects)

    def __exit__(self, *exc: object) -> None:
        session = self._session
        if self.node_id < 0 or session is None or not session.active:
            return
        if self._outputs:
            _record_outputs(session, self.node_id, self.device, self._outputs)
        session.node_end(self.node_id, self.device)


def _record_inputs(session: _session.Session, consumer: int, device: int, inputs: Iterable[Any]) -> None:
    lookup = _producers_of(session).lookup
    for obj in inputs:
        entry = lookup(obj)
        if entry is not None:
            session.tensor_edge(entry.producer, consumer, entry.tensor_id, entry.nbytes, entry.device, device)


def _record_outputs(session: _session.Session, producer: int, device: int, outputs: Iterable[Any]) -> None:
    record = _producers_of(session).record
    for obj in outputs:
        record(obj, session.new_tensor_id(), producer, device, nbytes_of(obj))


def traced(op: str | None = None, *, name: str | None = None, device: str = "cpu") -> Callable[[F], F]:
    """Decorator: each call is a node execution.

    The positional and keyword arguments are its inputs; the return value is its output (each
    element when it returns a tuple).
    """

    def wrap(func: F) -> F:
        node_name = str(name or getattr(func, "__qualname__", None) or getattr(func, "__name__", "node"))
        node_op = op or node_name

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _session._active is None:
                return func(*args, **kwargs)
            inputs = args + tuple(kwargs.values()) if kwargs else args
            with node(node_name, node_op, device=device, inputs=inputs) as scope:
                result = func(*args, **kwargs)
                if isinstance(result, tuple):
                    scope.output(*result)
                elif result is not None:
                    scope.output(result)
            return result

        return run  # type: ignore[return-value]

    return wrap


class step:
    """Mark a training or inference step: ``with tracer.step(i): ...``."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        self.number = number

    def __enter__(self) -> "step":
        session = _session._active
        if session is not None:
            session.step_begin(self.number)
        return self

    def __exit__(self, *exc: object) -> None:
        session = _session._active
        if session is not None:
            session.step_end()
