"""The package's layers, checked on the source: which folder may import which, and a pure core.

core/ decides and prices: no devices, files, processes or clock, so every number it gives
follows from its arguments alone. The package rules are docs/ARCHITECTURE.md's
table: the data flow goes one way, cli -> app -> world/render -> core/schemas, and no module
imports itself through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"

# docs/ARCHITECTURE.md's table: the specbench packages each package's modules may import.
ALLOWED = {
    "errors": set(),
    "extras": {"errors"},
    "core": {"core", "schemas", "errors"},
    "schemas": {"schemas", "core", "errors"},
    "render": {"extras"},
    "world": {"world", "core", "schemas", "errors", "extras"},
    "app": {"app", "world", "core", "schemas", "render", "errors", "extras"},
    "cli": {"cli", "app", "render", "errors"},
    "emuphone": {"emuphone", "errors", "extras"},
}
# A module that imports beyond its package's row, and what it may import instead (none does).
EXCEPTIONS: dict[str, set[str]] = {}
# What core/ must not import besides: the clock, processes, files and the operating system.
IMPURE = ("time", "datetime", "subprocess", "os", "pathlib", "shutil", "io", "tempfile", "multiprocessing",
          "threading", "socket", "glob")
# Calls that read or write files, refused in core/ whatever module they come from.
FILE_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "read_csv", "to_csv", "read_json",
              "to_json", "savefig", "load", "save", "savez", "loadtxt", "savetxt"}


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _refused(name: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if name == p or name.startswith(p + ".")), None)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_a_layer_imports_only_what_it_may(layer):
    paths = [PACKAGE / f"{layer}.py"] if (PACKAGE / f"{layer}.py").is_file() else _modules(layer)
    assert paths, f"specbench/{layer} has no modules"
    problems = []
    for path in paths:
        allowed = EXCEPTIONS.get(path.relative_to(PACKAGE).as_posix(), ALLOWED[layer])
        for line, name in _imports(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
            used = name.split(".")[1] if name.startswith("specbench.") else None
            if used in ALLOWED and used not in allowed:  # `specbench.__version__` is no layer
                problems.append(f"{where} ({layer} may use {sorted(allowed) or 'nothing of specbench'})")
            elif layer == "core" and _refused(name, IMPURE):
                problems.append(f"{where} (core is pure: no {_refused(name, IMPURE)})")
    assert not problems, "\n".join(problems)


def test_the_exceptions_name_modules_that_exist():
    assert all((PACKAGE / path).is_file() for path in EXCEPTIONS)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(module: str, tree: ast.AST, package: bool, modules: set[str]) -> set[str]:
    """The specbench modules `module` imports anywhere in its source (top level, functions,
    TYPE_CHECKING blocks): `from a.b import c` names the module a.b.c when there is one, else a.b."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                parent = module.split(".") if package else module.split(".")[:-1]
                base = ".".join(parent[:len(parent) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:  # `specbench.x.attribute` -> the module specbench.x
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every module of specbench/ -> the specbench modules it imports."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {module: _imported_modules(module, ast.parse(path.read_text(), str(path)), path.name == "__init__.py",
                                      set(paths))
            for module, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` as [a, b, ..., a], or None (depth-first search, in name order)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return path[path.index(imported):] + [imported]
            if imported not in state:
                cycle = visit(imported)
                if cycle:
                    return cycle
        path.pop()
        state[module] = 2
        return None

    return next((c for c in (visit(m) for m in sorted(graph) if m not in state) if c), None)


def test_no_module_imports_itself_through_others():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or ())


def test_the_cycle_check_sees_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
    tree = ast.parse("from . import tables\nfrom specbench.app.report.rows import main_rows\n")
    modules = {"specbench.app.report", "specbench.app.report.tables", "specbench.app.report.rows"}
    assert _imported_modules("specbench.app.report.energy", tree, False, modules) == {
        "specbench.app.report.tables", "specbench.app.report.rows"}


def test_core_reads_and_writes_no_files():
    problems = []
    for path in _modules("core"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name in FILE_CALLS:
                    problems.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} calls {name}()")
    assert not problems, "\n".join(problems)


def test_the_checks_see_a_forbidden_import_and_a_file_call():
    tree = ast.parse("import time\nfrom specbench.world.runner import find_runner\nopen('x')\n")
    names = [name for _, name in _imports(tree)]
    assert _refused("time", IMPURE) == "time" and "specbench.world.runner" in names
    assert _refused("timeit", IMPURE) is None  # prefixes match whole module names
    assert any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "open" for n in ast.walk(tree))
