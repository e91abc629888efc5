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


def _load_time_imports(path: Path) -> set[str]:
    """The modules a module imports when it is imported: not in functions, not for type checking."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)  # may be submodules
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
                for field in ("body", "orelse", "finalbody"):
                    visit(getattr(node, field, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(), str(path)).body)
    return names


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _top(name: str) -> str:
    return name.split(".")[0]


# Offline tools that live in tracer/ (they write traces, the recorder never loads them): the
# importers and the builder may use numpy and msgspec for whole tables.
OFFLINE = ("tracer/importers/", "tracer/builder.py")


def _offline(path: Path) -> bool:
    return path.relative_to(ROOT).as_posix().startswith(OFFLINE)


@pytest.mark.parametrize("path", _modules("tracer"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tracer_needs_only_the_standard_library(path: Path) -> None:
    # The recorder must load in any Python program; workloads are programs, not the recorder.
    if "workloads" in path.parts:
        return
    forbidden = {"tc_analyses", "numpy", "bt2", "click", "rich", "jinja2", "networkx", "lxml", "msgspec"}
    if _offline(path):
        forbidden -= {"numpy", "msgspec"}
    assert not {_top(n) for n in _imports(path)} & forbidden


def test_the_recorder_never_loads_numpy_through_the_offline_tools() -> None:
    """No module of the recorder reaches a module that imports numpy or msgspec, however
    indirectly (a module's packages count: importing a.b.c runs a/__init__ and a/b/__init__)."""
    graph: dict[str, set[str]] = {}
    heavy: set[str] = set()
    for p in _modules("tracer"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        imported = _load_time_imports(p)
        graph[name] = {n for n in imported if _top(n) == "tracer"}
        if {_top(n) for n in imported} & {"numpy", "msgspec"}:
            heavy.add(name)

    def parents(name: str) -> list[str]:
        parts = name.split(".")
        return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]

    for start, path in ((".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"), p)
                        for p in _modules("tracer")):
        if _offline(path) or "workloads" in path.parts:
            continue
        seen, todo = {start}, [start]
        while todo:
            for name in graph.get(todo.pop(), ()):
                for target in parents(name):
                    if target in graph and target not in seen:
                        assert target not in heavy, f"{start} loads {target}, which imports numpy or msgspec"
                        seen.add(target)
                        todo.append(target)


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
