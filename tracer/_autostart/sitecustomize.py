"""Started by ``dfcompass record``: each Python process of the job records as soon as it starts.

``dfcompass record`` puts this folder first on PYTHONPATH and names the job folder in
DFCOMPASS_RECORD_DIR. Both are inherited, so every Python process the program starts (spawn,
forkserver, torchrun workers, ``mp.spawn`` ranks) records too, each into its own trace in the job
folder; fork children are followed by a fork hook (tracer/job.py). DFCOMPASS_FOLLOW=0 records the
first process only. Any other sitecustomize on the path still runs.

When a process imports torch, a :class:`tracer.torch_source.TorchRecorder` starts on its session as
soon as torch has loaded, so PyTorch programs are traced with no code change (``DFCOMPASS_TORCH=0``
turns that off).
"""

import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))

if os.environ.get("DFCOMPASS_RECORD_DIR"):
    try:
        from tracer.job import start_from_environment

        start_from_environment()
    except Exception as exc:  # tracing must never stop the program from running
        print(f"dfcompass: error: cannot record process {os.getpid()}: {exc}", file=sys.stderr)

# Chain to the sitecustomize this one shadows, if any.
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
