"""Imports flow one way: tracer -> trace -> reader -> model -> engine -> perf -> analyses -> export -> inputs -> app -> cli."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("path", _modules("tracer"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tracer_needs_only_the_standard_library(path: Path) -> None:
    # The recorder must load in any Python program; workloads are programs, not the recorder.
    if "workloads" in path.parts:
        return
    forbidden = {"tc_analyses", "numpy", "bt2", "click", "rich", "jinja2", "networkx", "lxml"}
    assert not {_top(n) for n in _imports(path)} & forbidden


def test_bt2_is_imported_in_one_module_only() -> None:
    users = [p.relative_to(ROOT).as_posix() for p in _modules("tc_analyses") if "bt2" in {_top(n) for n in _imports(p)}]
    assert users == ["tc_analyses/reader/bt2_source.py"]


@pytest.mark.parametrize("path", _modules("tc_analyses"), ids=lambda p: str(p.relative_to(ROOT)))
def test_stages_do_not_import_downstream(path: Path) -> None:
    # Each stage, and the top-level modules that belong to one, imports only what comes before it.
    order = [["reader"], ["model"], ["engine"], ["perf"], ["analyses", "registry"], ["export"], ["inputs"], ["app", "cluster"],
             ["cli_support", "cli"]]
    stage_of = {name: i for i, names in enumerate(order) for name in names}
    parts = path.relative_to(ROOT / "tc_analyses").with_suffix("").parts
    stage = parts[0]
    if stage not in stage_of:  # errors.py and the package's __init__: imported by every stage
        return
    downstream = {f"tc_analyses.{name}" for names in order[stage_of[stage] + 1:] for name in names}
    bad = {n for n in _imports(path) if any(n == d or n.startswith(d + ".") for d in downstream)}
    assert not bad, f"{path.name} imports downstream stages {bad}"


def test_perf_is_a_checked_stage() -> None:
    # the shared performance model must not depend on the analyses that use it
    assert _modules("tc_analyses/perf")
    for path in _modules("tc_analyses/perf"):
        assert not {n for n in _imports(path) if n.startswith(("tc_analyses.analyses", "tc_analyses.export",
                                                                   "tc_analyses.cli"))}, path.name
