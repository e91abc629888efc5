"""The parts of recording that run in C++: built once by ``make setup``, never while a program runs.

``profile_walk`` (``profile_walk.cpp``) reads the inside of each op of a torch.profiler event tree
(allocations, the tensors its inner ops read) in place; the Python walk it replaces makes a pybind
object for every attribute it reads. The conversion gives the same trace either way
(tests/test_tracer/test_native_walk.py), so the module is an optimisation only: when it is not
built (no C++ compiler, a torch other than the one it was built against), recording takes the
Python walk.

``python -m tracer.native build`` compiles it with torch's extension builder (g++ and ninja) into
``<venv>/dfcompass-native/`` (``DFCOMPASS_NATIVE_DIR`` elsewhere), stamped with the torch version
it is built for. ``DFCOMPASS_NATIVE=0`` makes recording use the Python walk.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_SOURCE = Path(__file__).with_name("profile_walk.cpp")
_NAME = "dfcompass_profile_walk"
_loaded: dict[str, ModuleType | None] = {}


def native_dir() -> Path:
    return Path(os.environ.get("DFCOMPASS_NATIVE_DIR") or Path(sys.prefix) / "dfcompass-native")


def _stamp(torch: Any) -> str:
    # The module links against this torch's libraries and this source: either changing means a rebuild.
    return f"torch {torch.__version__}; source {_SOURCE.stat().st_mtime_ns}:{_SOURCE.stat().st_size}\n"


def profile_walk(torch: Any) -> ModuleType | None:
    """The built module for this torch, or None (then the Python walk is used)."""
    if os.environ.get("DFCOMPASS_NATIVE") == "0":
        return None  # asked for the Python walk
    if "walk" in _loaded:
        return _loaded["walk"]
    module = None
    folder = native_dir()
    try:
        if (folder / "stamp").read_text() == _stamp(torch):
            spec = importlib.util.spec_from_file_location(_NAME, folder / f"{_NAME}.so")
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
    except (OSError, ImportError):
        module = None
    _loaded["walk"] = module
    return module


def build(verbose: bool = False, force: bool = False) -> Path:
    """Compile profile_walk.cpp for the installed torch, unless it is built already (`force`:
    anyway); the folder it is in. Raises on failure."""
    import torch
    from torch.utils.cpp_extension import include_paths, load

    folder = native_dir()
    if not force and profile_walk(torch) is not None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stamp").unlink(missing_ok=True)
    kineto = [str(Path(p) / "kineto") for p in include_paths() if (Path(p) / "kineto").is_dir()]
    load(_NAME, [str(_SOURCE)], extra_include_paths=kineto, extra_cflags=["-O2", "-DUSE_KINETO"],
         build_directory=str(folder), verbose=verbose)
    (folder / "stamp").write_text(_stamp(torch))
    _loaded.pop("walk", None)
    return folder
