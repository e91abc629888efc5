"""Started by ``dfcompass record``: begins a tracing session when Python starts.

``dfcompass record`` puts this folder first on PYTHONPATH and names the output directory in
DFCOMPASS_RECORD_DIR. The variable is removed at once, so only the first Python process
records (its child processes run untraced). Any other sitecustomize on the path still runs.

When the program imports torch, a :class:`tracer.torch_source.TorchRecorder` starts on the
session as soon as torch has loaded, so PyTorch programs are traced with no code change
(``DFCOMPASS_TORCH=0`` turns that off).
"""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_output = os.environ.pop("DFCOMPASS_RECORD_DIR", None)
_overwrite = os.environ.pop("DFCOMPASS_RECORD_OVERWRITE", "") == "1"

_torch_wanted = os.environ.pop("DFCOMPASS_TORCH", "1") != "0"


def _start_torch_recorder(_module: object) -> None:
    try:
        from tracer.torch_source import TorchRecorder

        # The recorder stops when the session does (a stop hook: exit, SIGTERM), converting first.
        TorchRecorder().start()
    except Exception as exc:  # tracing must never stop the program from running
        print(f"dfcompass: error: cannot record PyTorch: {exc}", file=sys.stderr)


if _output:
    try:
        import tracer
        from tracer.import_hooks import call_after_import

        tracer.start(_output, overwrite=_overwrite)
        if _torch_wanted:
            call_after_import("torch", _start_torch_recorder)
    except Exception as exc:  # tracing must never stop the program from running
        print(f"dfcompass: error: cannot record to {_output}: {exc}", file=sys.stderr)

# Chain to the sitecustomize this one shadows, if any.
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
