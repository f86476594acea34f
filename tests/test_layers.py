"""The package's layers, checked on the source: which folder may import which, and a pure core.

core/ decides and prices: no devices, files, processes or clock, so every number it gives
follows from its arguments alone. The package rules are docs/ARCHITECTURE.md's
table: the data flow goes one way, cli -> app -> world/render -> core/schemas.
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
    "cli": {"cli", "app", "world", "core", "schemas", "render", "errors", "extras"},
    "emuphone": {"emuphone", "errors", "extras"},
}
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
        for line, name in _imports(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
            used = name.split(".")[1] if name.startswith("specbench.") else None
            if used in ALLOWED and used not in ALLOWED[layer]:  # `specbench.__version__` is no layer
                problems.append(f"{where} ({layer} may use {sorted(ALLOWED[layer]) or 'nothing of specbench'})")
            elif layer == "core" and _refused(name, IMPURE):
                problems.append(f"{where} (core is pure: no {_refused(name, IMPURE)})")
    assert not problems, "\n".join(problems)


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
