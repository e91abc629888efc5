"""PyTorch module scopes: which ``nn.Module`` each op ran in, and where a profiling window may end.

Global ``nn.Module`` hooks open a cheap C++ record function, ``dfc.module::<path>``, per forward
call; the event tree's walk (:mod:`tracer.torch_events`) gives each op the innermost one around it,
and backward ops take the scope of their forward op (autograd sequence number). A thread also
tells its OS id once, in a ``dfc.thread::<id>`` record function (the profiler numbers threads its
own way). The same hooks tell the recorder (:mod:`tracer.torch_source`) of each outermost forward:
a point where a streaming window may end.

torch is passed in, never imported here.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable

from tracer.recorder_cost import RecorderCost, timed_hook
from tracer.stack import DATA_LOADER_FILE, in_file
from tracer.verbosity import verbose

MODULE_MARK = "dfc.module::"
THREAD_MARK = "dfc.thread::"


def _compiling() -> bool:
    """Whether dynamo is tracing this call into a graph (torch.compile). Dynamo folds this test to
    True while it traces, so a hook that returns on it adds nothing to the graph and no graph
    break, and ``fullgraph=True`` still holds; at run time it is False and costs a call."""
    return _is_compiling()


def _never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = _never_compiling


def _bind_compiling(torch: Any) -> None:
    global _is_compiling
    compiler = getattr(torch, "compiler", None)
    _is_compiling = getattr(compiler, "is_compiling", _never_compiling)


def _timed_unless_compiling(cost: RecorderCost, hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook`, timed (tracer/recorder_cost.py), except while dynamo traces it into a graph: a
    clock read there breaks the graph (a compiled program then ran without its compiled graph)."""
    timed = timed_hook(cost, hook)

    def hook_or_timed(*args: Any) -> Any:
        return hook(*args) if _compiling() else timed(*args)
    return hook_or_timed


class _ModuleScopes:
    """Global module hooks: each forward call becomes a ``dfc.module::<path>`` record function."""

    def __init__(self, torch: Any, on_outermost: Callable[[Any], None] | None = None, record: bool = True,
                 cost: RecorderCost | None = None) -> None:
        _bind_compiling(torch)
        self._torch = torch
        self._record = torch._C._profiler._RecordFunctionFast
        self._on_outermost = on_outermost  # called before an outermost forward opens its scope
        self._recording = record
        self._names: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._roots: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._local = threading.local()
        self._handles: list[Any] = []
        self._cost = cost  # the hooks' time is the program's: counted when given

    def install(self) -> None:
        # torch.compile(module) warns that global hooks fire once more, for its OptimizedModule
        # wrapper: ours name that call by the wrapped model and skip the compiled frame's own
        # calls (_compiling), so the warning is only noise in the program's output.
        if not verbose():
            warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
        hooks = self._torch.nn.modules.module
        pre, post = self._pre, self._post
        if self._cost is not None:
            pre, post = _timed_unless_compiling(self._cost, pre), _timed_unless_compiling(self._cost, post)
        self._handles = [hooks.register_module_forward_pre_hook(pre),
                         hooks.register_module_forward_hook(post, always_call=True)]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def path(self, module: Any, outermost: bool = False) -> str:
        """The module's dotted path under the outermost module that contains it when called."""
        if outermost and module not in self._roots:
            # Called from no other module: it names its whole tree, even submodules that ran
            # on their own earlier and were named as roots then.
            self._roots.add(module)
            self._name_tree(module, overwrite=True)
        name = self._names.get(module)
        if name is None:  # created after its root was named, or called under a foreign root
            self._name_tree(module, overwrite=False)
            name = self._names[module]
        return name

    def _name_tree(self, root: Any, overwrite: bool) -> None:
        label = type(getattr(root, "_orig_mod", root)).__name__  # torch.compile's wrapper: the model's own name
        for sub_name, sub in root.named_modules():
            if overwrite or sub not in self._names:
                self._names[sub] = f"{label}.{sub_name}" if sub_name else label

    def mark_thread(self) -> None:
        """Tell the profile this thread's OS id (the profiler numbers threads its own way)."""
        with self._record(THREAD_MARK + str(threading.get_native_id())):
            pass

    def open(self) -> bool:
        """Whether a module scope of ours is open on this thread (inside a forward)."""
        return bool(getattr(self._local, "stack", None))

    def _pre(self, module: Any, args: Any) -> None:
        if _compiling():  # dynamo traces global hooks into the graph: ours must leave it as it is
            return
        stack = getattr(self._local, "stack", None)
        if not stack and self._on_outermost is not None:
            self._on_outermost(module)  # no scope of ours is open here: a point where a window may end
        if not self._recording:
            return
        if stack is None:
            stack = self._local.stack = []
            self.mark_thread()
        scope = self._record(MODULE_MARK + self.path(module, outermost=not stack))
        scope.__enter__()
        stack.append(scope)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self._recording or _compiling():
            return
        stack = getattr(self._local, "stack", None)
        if stack:
            stack.pop().__exit__(None, None, None)
            if not stack:
                self._mark_backward_thread(output)

    def _mark_backward_thread(self, output: Any) -> None:
        """Have the thread that runs this output's backward tell its OS id too: with CUDA tensors
        backward runs on autograd's own device thread, which no forward ever runs on."""
        values = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else (output,)
        for value in values:
            if isinstance(value, self._torch.Tensor) and value.grad_fn is not None:
                if value.device.type != "cpu":  # a CPU backward runs on the calling thread, already told
                    value.register_hook(self._on_backward)
                return

    def _on_backward(self, grad: Any) -> None:
        self.mark_thread()


def _may_end_window_at(module: Any) -> bool:
    """Whether an outermost forward of `module` may end a profiling window. Not a module without
    parameters (a torchvision transform such as Normalize), and not inside a DataLoader's fetch:
    the loader's own record_function is open there, and stopping the profiler under it crashed
    torch (a segfault in pytorch/examples' MNIST, one run in two)."""
    if next(module.parameters(), None) is None:
        return False
    return not _in_data_loader()


def _in_data_loader() -> bool:
    """Whether a DataLoader's code is on this thread's stack (up to 40 frames)."""
    return in_file(DATA_LOADER_FILE, frames=40)
