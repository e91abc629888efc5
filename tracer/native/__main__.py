"""``python -m tracer.native build``: compile the C++ parts of recording (see tracer/native/__init__.py)."""

from __future__ import annotations

import sys

from tracer.native import build, native_dir


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m tracer.native build", file=sys.stderr)
        return 2
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
