"""No module of tc_analyses/ or tracer/ is over 600 lines: one that grows past it is split by
concern (the house rule of issue 39), not trimmed of its comments."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for package in ("tc_analyses", "tracer") for p in (ROOT / package).rglob("*.py")}
    assert len(sizes) > 150  # the packages were found
    assert {path: n for path, n in sizes.items() if n > LIMIT} == {}
