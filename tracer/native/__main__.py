"""``python -m tracer.native build``: compile the C++ parts of recording (see tracer/native/__init__.py)."""

from __future__ import annotations

import sys

from tracer.native import build, build_converter, build_observer, native_dir


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m tracer.native build", file=sys.stderr)
        return 2
    try:
        build_observer()  # seconds; without it recording uses torch.profiler
    except ImportError as exc:
        print(f"tracer.native: op observer not built: {exc}", file=sys.stderr)
    except Exception as exc:
        print(f"tracer.native: op observer not built in {native_dir()}: {exc} (recording uses torch.profiler)",
              file=sys.stderr)
    try:
        build_converter()  # a second; without it the observer's windows convert in Python
    except Exception as exc:
        print(f"tracer.native: window converter not built in {native_dir()}: {exc} (windows convert in Python)",
              file=sys.stderr)
    try:
        folder = build()
    except ImportError as exc:
        print(f"tracer.native: not built: {exc} (recording uses the Python walk)", file=sys.stderr)
        return 1
    except Exception as exc:  # the compiler's own message is long: the first line says what failed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"tracer.native: not built in {native_dir()}: {first} (recording uses the Python walk)", file=sys.stderr)
        return 1
    print(f"tracer.native: built in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
