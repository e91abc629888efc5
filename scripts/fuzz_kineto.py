"""Fuzz import-kineto with N seeded mutations (``make fuzz``; default 10,000) and count the outcomes.

Every case must import or fail with a KinetoImportError whose one-line message starts with the file;
anything else is counted by exception class with its first seed, and the exit status is 1.
Usage: ``.venv/bin/python scripts/fuzz_kineto.py [N]``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzz.kineto_mutations import mutate  # noqa: E402
from tracer.importers import KinetoImportError, import_kineto  # noqa: E402


def main(count: int) -> int:
    outcomes: Counter[str] = Counter()
    first: dict[str, int] = {}
    slowest = (0.0, -1)
    with tempfile.TemporaryDirectory(prefix="dfc-fuzz-") as tmp:
        for seed in range(count):
            src = Path(tmp) / f"case{seed}.json"
            src.write_bytes(mutate(seed))
            started = time.perf_counter()
            try:
                import_kineto(src, Path(tmp) / f"out{seed}")
                outcome = "imported"
            except KinetoImportError as exc:
                text = str(exc)
                outcome = "one-line error" if text.startswith(str(src)) and "\n" not in text else "bad message"
            except Exception as exc:  # noqa: BLE001 - what the fuzzer hunts
                outcome = f"internal error: {type(exc).__name__}"
            slowest = max(slowest, (time.perf_counter() - started, seed))
            outcomes[outcome] += 1
            first.setdefault(outcome, seed)
    for outcome, n in sorted(outcomes.items()):
        print(f"{outcome:40s} {n:6d}  (first seed {first[outcome]})")
    print(f"slowest case: seed {slowest[1]}, {slowest[0] * 1e3:.0f} ms")
    failures = sum(n for o, n in outcomes.items() if o not in ("imported", "one-line error"))
    print(f"{count} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
