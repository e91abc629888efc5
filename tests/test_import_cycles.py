"""No two modules of tc_analyses/ and tracer/ import each other, lazily or not.

Every import statement counts: at the top of a module, inside a function (a lazy import still
ties the two modules together, and the cycle bites as soon as one is reorganised) and under
``TYPE_CHECKING``. ``from package import name`` counts as an import of ``package.name`` when that
is a module, else of the package.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tc_analyses", "tracer")

# Cycles that were there before this test, each pair sorted: none is left (the last two were broken
# in issue 39). Never add one: move what both need to where it belongs instead.
KNOWN: set[tuple[str, str]] = set()


def _module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _module_files()


def _known(name: str) -> str | None:
    """`name`, or the longest package of it that is one of ours; None when it is not ours."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every module of ours that `module` imports, wherever the statement is."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(m for alias in node.names if (m := _known(alias.name)) is not None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..y import z
                parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else _known(base)
                if target is not None:
                    found.add(target)
    found.discard(module)
    return found


def _graph() -> dict[str, set[str]]:
    return {module: _imports(module, path) for module, path in MODULES.items()}


def test_no_two_modules_import_each_other() -> None:
    graph = _graph()
    pairs = {(a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, set())}
    assert pairs - KNOWN == set(), "modules that import each other (counting lazy imports): " + ", ".join(
        f"{a} <-> {b}" for a, b in sorted(pairs - KNOWN))
    assert KNOWN - pairs == set(), f"broken cycles still listed as known: {sorted(KNOWN - pairs)}"


def test_no_longer_import_cycles() -> None:
    # a cycle through three modules or more (a -> b -> c -> a), once the known pairs are taken out
    graph = {a: {b for b in targets if (min(a, b), max(a, b)) not in KNOWN} for a, targets in _graph().items()}
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                cycle = path[path.index(child):] + [child]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            elif child not in done and child in graph:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)


def test_the_graph_sees_lazy_imports() -> None:
    # the parser finds function-level imports: cluster's workers import app.analyze lazily
    graph = _graph()
    assert "tc_analyses.app.analyze" in graph["tc_analyses.cluster"]
    assert "tc_analyses.cluster" in graph["tc_analyses.app.jobs"]
