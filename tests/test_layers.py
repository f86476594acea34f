"""The package's layers, checked on the source: which folder may import which, and a pure core.

core/ decides and prices: no devices, files, processes or clock, so every number it gives
follows from its arguments alone. The other rules keep the data flow one way:
cli -> app -> world/render -> schemas/core.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"

# What each folder must not import (module prefixes).
FORBIDDEN = {
    "core": ("specbench.world", "specbench.app", "specbench.render", "specbench.cli", "specbench.emuphone",
             "specbench.schemas.fileio", "time", "datetime", "subprocess", "os", "pathlib", "shutil", "io",
             "tempfile", "multiprocessing", "threading", "socket", "glob"),
    "schemas": ("specbench.world", "specbench.app", "specbench.render", "specbench.cli", "specbench.emuphone"),
    "world": ("specbench.app", "specbench.render", "specbench.cli"),
    "render": ("specbench.world", "specbench.app", "specbench.cli"),
    "app": ("specbench.cli",),
    "emuphone": ("specbench.world", "specbench.app", "specbench.render", "specbench.cli", "specbench.core"),
}
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


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_a_layer_imports_only_what_it_may(folder):
    assert _modules(folder), f"specbench/{folder} has no modules"
    problems = []
    for path in _modules(folder):
        tree = ast.parse(path.read_text(), str(path))
        for line, name in _imports(tree):
            prefix = _refused(name, FORBIDDEN[folder])
            if prefix:
                problems.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name} ({folder}/ may not use {prefix})")
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
    assert _refused("time", FORBIDDEN["core"]) == "time" and "specbench.world.runner" in names
    assert _refused("timeit", FORBIDDEN["core"]) is None  # prefixes match whole module names
    assert any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "open" for n in ast.walk(tree))
