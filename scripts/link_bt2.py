"""Make Debian's bt2 (python3-bt2) importable from the project venv.

bt2 is not on PyPI. Debian builds it for its CPython 3.11, so a venv on any CPython 3.11
with the same ABI can load it through one symlink; nothing else from Debian leaks in.
Idempotent: prints what it did and exits 0, or names the problem and exits 1.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

DEBIAN_BT2 = Path("/usr/lib/python3/dist-packages/bt2")
EXPECTED_SUFFIX = ".cpython-311-x86_64-linux-gnu.so"


def main() -> int:
    if not DEBIAN_BT2.is_dir():
        print(f"link_bt2: {DEBIAN_BT2} is missing; install python3-bt2 (make setup does)", file=sys.stderr)
        return 1
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    natives = sorted(p.name for p in DEBIAN_BT2.glob("_native_bt*.so"))
    if not any(name.endswith(suffix) for name in natives):
        print(f"link_bt2: this Python's extension suffix {suffix} does not match Debian's bt2 {natives}; "
              f"use a CPython with suffix {EXPECTED_SUFFIX}", file=sys.stderr)
        return 1
    target = Path(sysconfig.get_paths()["purelib"]) / "bt2"
    if target.is_symlink() and target.resolve() == DEBIAN_BT2.resolve():
        print("link_bt2: bt2 already linked")
        return 0
    if target.exists() or target.is_symlink():
        target.unlink()
    target.symlink_to(DEBIAN_BT2)
    print(f"link_bt2: linked {target} -> {DEBIAN_BT2}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
