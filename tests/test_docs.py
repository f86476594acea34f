"""The documentation stays in step with the code: the README's layout lists every module,
citations of docs/METHODS.md name sections that exist, every command is documented, and
Reads files only."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "specbench"
README = REPO / "README.md"
METHODS = REPO / "docs" / "METHODS.md"
CITATION = re.compile(r"docs/METHODS\.md §(\d+(?:\.\d+)*)")
OLD_CITATION = re.compile(r"(?<!docs/)\bMETHODS(?:\.md)?\s*(?:§|\d)")
"""A citation of the old spec's numbering (`METHODS §3.2`, `METHODS 5.1`)."""
CITING = ("specbench/**/*.py", "tests/**/*.py", "bench/*.py", "scripts/*", "specbench/native/src/*", "*.md", "*/README.md",
          "specbench/native/README.md", "docs/*.md")


def _section(doc: str, heading: str) -> str:
    start = doc.index(f"## {heading}\n")
    end = doc.find("\n## ", start + 1)
    return doc[start:] if end < 0 else doc[start:end]


def layout_entries() -> list[str]:
    """Paths the README's Layout block lists (directories end with '/'). Each entry is a line
    whose first word is indented two spaces per level below the directory above it; a line
    indented deeper than that continues the previous entry's description."""
    block = _section(README.read_text(encoding="utf-8"), "Layout")
    lines = block.split("```")[1].splitlines()[1:]
    stack: list[str] = []
    entries = []
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        level = indent // 2
        if indent % 2 or level > len(stack):
            continue  # a description's continuation
        name = line.split()[0]
        del stack[level:]
        path = "".join(stack) + name
        entries.append(path)
        if name.endswith("/"):
            stack.append(name)
    return entries


def package_modules() -> set[str]:
    """Every module under specbench/; an empty __init__.py only marks a package."""
    return {str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")
            if "__pycache__" not in p.parts and not (p.name == "__init__.py" and not p.read_text().strip())}


def test_layout_lists_every_module_and_nothing_else():
    entries = layout_entries()
    listed = {e for e in entries if e.endswith(".py")}
    missing = sorted(package_modules() - listed)
    assert not missing, f"README Layout lacks {missing}"
    absent = sorted(e for e in entries if not (REPO / e.rstrip("/")).exists())
    assert not absent, f"README Layout lists what does not exist: {absent}"
    assert {"docs/", "device_profiles/", "runners/", "results/", "specbench/native/", "bench/", "tests/"} <= set(entries)


def methods_sections() -> set[str]:
    return set(re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", METHODS.read_text(encoding="utf-8"), re.M))


def citing_files() -> list[Path]:
    files = {p for pattern in CITING for p in REPO.glob(pattern) if p.is_file() and "__pycache__" not in p.parts}
    return sorted(files)


def test_every_cited_methods_section_exists():
    sections = methods_sections()
    assert {"1", "2", "3", "4", "5", "6", "7", "8", "9"} <= sections
    cited = {}
    for path in citing_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number in CITATION.findall(text):
            cited.setdefault(number, str(path.relative_to(REPO)))
        if path.parent.name == "docs":  # the docs cite their own sections as a bare §N
            for number in re.findall(r"§(\d+(?:\.\d+)*)", text):
                cited.setdefault(number, str(path.relative_to(REPO)))
    unknown = {n: where for n, where in cited.items() if n not in sections}
    assert not unknown, f"citations of sections docs/METHODS.md does not have: {unknown}"
    assert cited, "nothing cites docs/METHODS.md"


def test_no_citation_of_the_old_numbering():
    old = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in citing_files() if p != Path(__file__).resolve()
           for m in OLD_CITATION.finditer(p.read_text(encoding="utf-8", errors="replace"))]
    assert not old, f"cite docs/METHODS.md §N instead: {old}"


def test_every_command_is_in_the_readme():
    from specbench.cli import COMMANDS

    readme = README.read_text(encoding="utf-8")
    missing = sorted(name for name in COMMANDS if f"specbench {name}" not in readme)
    assert not missing, f"README never mentions `specbench {missing[0]}`"
