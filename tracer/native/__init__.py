"""The parts of recording that run in C++: built once by ``make setup``, never while a program runs.

``op_observer`` (``op_observer.cpp``) records every op and allocation with a RecordFunction
callback, without torch.profiler (:mod:`tracer.torch_observer`); a C library loaded with ctypes,
built with g++ against torch's headers in seconds.

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

import ctypes
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_SOURCE = Path(__file__).with_name("profile_walk.cpp")
_NAME = "dfcompass_profile_walk"
_OBSERVER_SOURCE = Path(__file__).with_name("op_observer.cpp")
_OBSERVER = "dfcompass_op_observer.so"
_CONVERTER_SOURCES = tuple(Path(__file__).with_name(name) for name in (
    "window_convert.cpp", "window_walk.cpp", "window_edges.cpp", "window_convert.h"))
_CONVERTER = "dfcompass_window_convert.so"
_loaded: dict[str, ModuleType | ctypes.CDLL | None] = {}


def native_dir() -> Path:
    return Path(os.environ.get("DFCOMPASS_NATIVE_DIR") or Path(sys.prefix) / "dfcompass-native")


def _stamp(torch: Any, source: Path = _SOURCE) -> str:
    # The module links against this torch's libraries and this source: either changing means a rebuild.
    return f"torch {torch.__version__}; source {source.stat().st_mtime_ns}:{source.stat().st_size}\n"


def op_observer(torch: Any) -> ctypes.CDLL | None:
    """The built op observer for this torch, or None (then recording uses torch.profiler)."""
    if "observer" in _loaded:
        return _loaded["observer"]  # type: ignore[return-value]
    library = None
    folder = native_dir()
    try:
        if (folder / "observer-stamp").read_text() == _stamp(torch, _OBSERVER_SOURCE):
            library = ctypes.CDLL(str(folder / _OBSERVER))
    except OSError:
        library = None
    _loaded["observer"] = library
    return library


def _source_stamp(sources: tuple[Path, ...]) -> str:
    return "".join(f"source {source.name} {source.stat().st_mtime_ns}:{source.stat().st_size}\n" for source in sources)


def window_converter() -> ctypes.CDLL | None:
    """The built window converter (the op observer's windows into records, in C++), or None (then
    they convert in Python). ``DFCOMPASS_NATIVE=0``: None."""
    if os.environ.get("DFCOMPASS_NATIVE") == "0":
        return None
    if "converter" in _loaded:
        return _loaded["converter"]  # type: ignore[return-value]
    library = None
    folder = native_dir()
    try:
        if (folder / "converter-stamp").read_text() == _source_stamp(_CONVERTER_SOURCES):
            library = ctypes.CDLL(str(folder / _CONVERTER))
    except OSError:
        library = None
    _loaded["converter"] = library
    return library


def build_converter(force: bool = False) -> Path:
    """Compile the window converter (window_*.cpp) with g++, no torch headers: seconds. Unless built already."""
    folder = native_dir()
    if not force and window_converter() is not None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "converter-stamp").unlink(missing_ok=True)
    target = folder / f"{_CONVERTER}.new"
    sources = [str(source) for source in _CONVERTER_SOURCES if source.suffix == ".cpp"]
    done = subprocess.run(["g++", "-O2", "-std=c++17", "-fPIC", "-shared", *sources, "-o", str(target)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"g++ failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    target.replace(folder / _CONVERTER)  # renamed into place, as the observer
    (folder / "converter-stamp").write_text(_source_stamp(_CONVERTER_SOURCES))
    _loaded.pop("converter", None)
    return folder


def build_observer(force: bool = False) -> Path:
    """Compile op_observer.cpp against the installed torch with g++, unless built already."""
    import torch
    from torch.utils.cpp_extension import include_paths, library_paths

    folder = native_dir()
    if not force and op_observer(torch) is not None:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "observer-stamp").unlink(missing_ok=True)
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    command = ["g++", "-O2", "-DNDEBUG", "-std=c++17", "-fPIC", "-shared", "-Wno-c++20-extensions",
               f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *[f"-I{path}" for path in include_paths()],
               str(_OBSERVER_SOURCE), "-o", str(folder / f"{_OBSERVER}.new"),
               *[f"-L{path}" for path in library_paths()], "-lc10", "-ltorch_cpu",
               *[f"-Wl,-rpath,{path}" for path in library_paths()]]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"g++ failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    # Renamed into place: a process that has the old library loaded keeps its (unlinked) file.
    (folder / f"{_OBSERVER}.new").replace(folder / _OBSERVER)
    (folder / "observer-stamp").write_text(_stamp(torch, _OBSERVER_SOURCE))
    _loaded.pop("observer", None)
    return folder


def profile_walk(torch: Any) -> ModuleType | None:
    """The built module for this torch, or None (then the Python walk is used)."""
    if os.environ.get("DFCOMPASS_NATIVE") == "0":
        return None  # asked for the Python walk
    if "walk" in _loaded:
        return _loaded["walk"]  # type: ignore[return-value]
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
