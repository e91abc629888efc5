"""Seeded fuzzing of import-kineto: every mutated file imports or fails with one line naming it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.fuzz.kineto_mutations import mutate
from tracer.importers import KinetoImportError, import_kineto

SEEDS = range(300)


def test_mutated_kineto_files_import_or_fail_with_one_line(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()
    for seed in SEEDS:
        src = tmp_path / f"case{seed}.json"
        src.write_bytes(mutate(seed))
        try:
            import_kineto(src, tmp_path / f"out{seed}")
            outcomes["imported"] += 1
        except KinetoImportError as exc:
            message = str(exc)
            assert message.startswith(str(src)) and "\n" not in message, f"seed {seed}: {message!r}"
            outcomes["error"] += 1
        except Exception as exc:  # noqa: BLE001 - any other exception is what the fuzzer hunts
            pytest.fail(f"seed {seed}: {type(exc).__name__}: {exc}")
    assert outcomes["imported"] > 50 and outcomes["error"] > 50, outcomes  # the mutations reach both ends


FIXTURES = sorted((Path(__file__).resolve().parent.parent / "data" / "fuzz" / "kineto").glob("*.json"))


@pytest.mark.parametrize("src", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_inputs_that_once_failed_stay_fixed(src: Path, tmp_path: Path) -> None:
    """Mutated files that once ended in an internal error (unhashable pids in metadata and flows, a
    2^70 device id, a Decimal exponent past its range); kept as files, so they outlive the mutator."""
    try:
        import_kineto(src, tmp_path / "out")
    except KinetoImportError as exc:
        assert str(exc).startswith(str(src)) and "\n" not in str(exc)
