"""The Python graphs of TensorFlow's functions, found once per function: tensor sizes for the edges.

The runtime's run metadata names the graphs that ran but carries no shapes; the traced ``FuncGraph``
of each function does (static shapes). A function's graph is registered when its
``AtomicFunction`` is made (:func:`watch_functions`, installed as soon as TensorFlow is loaded in a
recorded process), so finding it costs a dict lookup. A function made before the hook (a program
that built its model before importing :mod:`tracer.tf_source`) is found by one scan of the heap,
done only when a run names a function the registry does not hold: it cost 50-150 ms per recording,
which on a short ``fit`` was the recorder's largest single cost.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

_registry: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
_watching = False


def _function_name(function: Any) -> str:
    name = function.name
    return name.decode() if isinstance(name, bytes) else str(name)


def _atomic_function_class() -> Any:
    from tensorflow.python.eager.polymorphic_function.atomic_function import AtomicFunction

    return AtomicFunction


def watch_functions() -> None:
    """Register every AtomicFunction made from now on (idempotent). Needs TensorFlow loaded."""
    global _watching
    if _watching:
        return
    cls = _atomic_function_class()
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            _registry[_function_name(self)] = self
        except Exception:  # a registry miss only costs the heap scan later; never the program's call
            pass

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__
    _watching = True


class FuncGraphSizes:
    """Output sizes from the Python ``FuncGraph`` of the functions that ran.

    A node of an inlined call is named ``<call op>/<node in the callee>``: the call op's ``f``
    attribute names the callee, where the rest of the name is looked up.
    """

    def __init__(self) -> None:
        self._functions: dict[str, Any] = {}  # found by the heap scan
        self._graphs: dict[str, Any] = {}
        self._scanned = False
        self._known: dict[tuple[str, str, int], int] = {}
        self.heap_scans = 0

    def nbytes(self, function: str, node: str, slot: int) -> int:
        key = (function, node, slot)
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = self._lookup(function, node, slot)
        return found

    def _graph(self, name: str) -> Any:
        graph = self._graphs.get(name)
        if graph is None and name:
            function = _registry.get(name) or self._functions.get(name)
            if function is None and not self._scanned:
                self._scan_heap()
                function = self._functions.get(name)
            if function is not None:
                graph = self._graphs[name] = function.graph
        return graph

    def _scan_heap(self) -> None:
        cls = _atomic_function_class()
        # An exact type test: isinstance goes through ABC checks, 10x slower over a whole heap.
        classes = {cls, *cls.__subclasses__()}
        for obj in gc.get_objects():
            if type(obj) in classes:
                self._functions.setdefault(_function_name(obj), obj)
        self._scanned = True
        self.heap_scans += 1

    def _lookup(self, function: str, node: str, slot: int) -> int:
        graph = self._graph(function)
        depth = 0
        while graph is not None and depth < 8:
            try:
                op = graph.get_operation_by_name(node)
            except (KeyError, ValueError):
                head, _, rest = node.partition("/")
                try:
                    call = graph.get_operation_by_name(head) if rest else None
                except (KeyError, ValueError):
                    return 0
                if call is None or "f" not in call.node_def.attr:
                    return 0
                graph, node, depth = self._graph(call.node_def.attr["f"].func.name), rest, depth + 1
                continue
            if slot >= len(op.outputs):
                return 0
            tensor = op.outputs[slot]
            if not tensor.shape.is_fully_defined():
                return 0
            return int(tensor.shape.num_elements()) * int(tensor.dtype.size)
        return 0
