"""The documentation stays in step with the code: the CLI reference is what the commands print,
the architecture's layout lists every module, every citation of docs/METHODS.md names a section
that exists by its number and its title, every document a file names exists, and the README
mentions every command. Reads files only.

Citations take one form, `docs/METHODS.md §4.7 Declared drafter costs`: the number, then the
section's title as its heading has it (a title's trailing parenthetical, such as "(`sd`)", may be
left out). A title may wrap onto the next line of a comment. docs/METHODS.md cites its own
sections as a bare `§N`.

A document is named in capitals (`README.md`, `docs/METHODS.md`) or by a path under `docs/`;
lowercase `*.md` names (`report.md`) are files specbench writes. A name resolves against the
naming file's directory or any directory above it up to the repository root (`/x` against the
root), and a bare name also against docs/; a name inside a URL belongs to another project and is
not checked.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from functools import cache
from itertools import zip_longest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "specbench"
README = REPO / "README.md"
METHODS = REPO / "docs" / "METHODS.md"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"
CLI_DOCS = REPO / "scripts" / "cli-docs"

PROJECT_DIRS = ("specbench", "tests", "bench", "scripts", "docs", "device_profiles", ".ci", ".github")
"""Folders whose text files are code or docs; runners/ and results/ hold outputs and only their README counts."""
OUTPUT_DIRS = ("runners", "results")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".cpp", ".h", ".hpp", ".c", ".txt", ".toml", ".cfg", ".sh", ""}
SKIPPED_PARTS = {"__pycache__", ".venv", "build", ".pytest_cache", ".hypothesis", ".git"}

SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
CONTINUATION = re.compile(r"[ \t]*\n[ \t]*(?:#+|//+|\*(?=\s))?[ \t]*")
"""A line break inside a citation, with the comment marker the next line starts with."""
OLD_CITATION = re.compile(r"\bMETHODS(?:\.md)?(?![\w.])[\s,:]*(?:§|\d|sec(?:tions?|\.)?\b)"
                          r"|(?:\b[Ss]ection|§)\s*\d[\d.]*\s+of\s+(?:docs/)?METHODS")
"""Any citation of docs/METHODS.md: `METHODS §3.2`, `METHODS 5.1`, `METHODS section 5`, `§4.2 of METHODS`."""
PROPER_CITATION = re.compile(r"docs/METHODS\.md\s+§")
DOC_PATH = re.compile(r"(?<![\w./:-])(?:/|\.{1,2}/)*(?:[\w.-]+/)*(?:[A-Z][A-Z0-9_-]*\.md|docs/[\w./-]*[\w/])")
"""A document's name: capitals + .md (with any folders before it), or a path under docs/."""


def _section(doc: str, heading: str) -> str:
    start = doc.index(f"## {heading}\n")
    end = doc.find("\n## ", start + 1)
    return doc[start:] if end < 0 else doc[start:end]


@cache
def project_files() -> tuple[Path, ...]:
    """The repository's own text files: code, tests, scripts, docs, data the tests read."""
    files = [p for p in REPO.iterdir() if p.is_file() and (p.suffix == ".md" or p.name == "Makefile")]
    for folder in PROJECT_DIRS:
        files += [p for p in (REPO / folder).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]
    files += [REPO / folder / "README.md" for folder in OUTPUT_DIRS if (REPO / folder / "README.md").is_file()]
    return tuple(sorted(p for p in files if not SKIPPED_PARTS & set(p.relative_to(REPO).parts)
                        and not any(part.endswith(".egg-info") for part in p.parts)))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _where(path: Path, text: str, offset: int) -> str:
    return f"{path.relative_to(REPO)}:{text.count(chr(10), 0, offset) + 1}"


# --- the CLI reference ----------------------------------------------------------------------------------------------


def test_the_cli_reference_is_what_the_commands_print():
    loader = importlib.machinery.SourceFileLoader("cli_docs", str(CLI_DOCS))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("cli_docs", loader))
    loader.exec_module(module)
    expected = module.cli_reference()
    current = module.CLI_MD.read_text(encoding="utf-8")
    pairs = enumerate(zip_longest(current.splitlines(), expected.splitlines()), 1)
    stale = next((i for i, (have, want) in pairs if have != want), None)
    assert current == expected, f"docs/CLI.md is stale (first difference at line {stale}): run python scripts/cli-docs"


def test_the_cli_reference_has_every_command():
    from specbench.cli import COMMANDS

    reference = (REPO / "docs" / "CLI.md").read_text(encoding="utf-8")
    missing = [name for name in COMMANDS if f"\n## specbench {name}\n" not in reference]
    assert not missing, f"docs/CLI.md lacks {missing}"


# --- the layout ------------------------------------------------------------------------------------------------------


def layout_entries() -> list[str]:
    """Paths the Layout block of docs/ARCHITECTURE.md lists (directories end with '/'). Each entry
    is a line whose first word is indented two spaces per level below the directory above it; a
    line indented deeper than that continues the previous entry's description."""
    block = _section(ARCHITECTURE.read_text(encoding="utf-8"), "Layout")
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
    assert not missing, f"docs/ARCHITECTURE.md Layout lacks {missing}"
    absent = sorted(e for e in entries if not (REPO / e.rstrip("/")).exists())
    assert not absent, f"docs/ARCHITECTURE.md Layout lists what does not exist: {absent}"
    expected = {"docs/", "device_profiles/", "runners/", "results/", "specbench/native/", "bench/", "tests/"}
    assert expected <= set(entries)


# --- citations of docs/METHODS.md -------------------------------------------------------------------------------------


@cache
def methods_titles() -> dict[str, str]:
    """Section number -> its heading's title."""
    return {number: title.strip() for number, title in
            re.findall(r"^#{2,4} (\d+(?:\.\d+)*)\.? (.+)$", METHODS.read_text(encoding="utf-8"), re.M)}


def title_forms(title: str) -> tuple[str, ...]:
    """The title as the heading has it, and without a trailing parenthetical ("Serial speculative decoding")."""
    short = re.sub(r"\s*\([^()]*\)$", "", title)
    return (title, short) if short != title else (title,)


def citations(path: Path, text: str) -> list[tuple[str, str, str]]:
    """(where, section number, the text after it with its line breaks joined) for every `§N` in `text`."""
    return [(_where(path, text, m.start()), m.group(1), CONTINUATION.sub(" ", text[m.end():m.end() + 400]))
            for m in SECTION.finditer(text)]


def citation_problems(path: Path, text: str) -> list[str]:
    titles = methods_titles()
    problems = []
    for where, number, after in citations(path, text):
        if number not in titles:
            problems.append(f"{where}: §{number} is no section of docs/METHODS.md")
        elif path != METHODS and not any(after.startswith(" " + form) for form in title_forms(titles[number])):
            problems.append(f"{where}: §{number} must name its title: §{number} {titles[number]}")
    return problems


def test_every_citation_names_a_section_and_its_title():
    titles = methods_titles()
    assert {"1", "2", "3", "4", "5", "6", "7", "8", "9"} <= set(titles)
    problems = [problem for path in project_files() if path != Path(__file__).resolve()
                for problem in citation_problems(path, _text(path))]
    assert not problems, "citations of docs/METHODS.md:\n" + "\n".join(problems)
    assert any(SECTION.search(_text(p)) for p in project_files() if p != METHODS), "nothing cites docs/METHODS.md"


def test_the_citation_check_sees_a_wrong_or_missing_title():
    here = REPO / "specbench" / "x.py"
    assert not citation_problems(here, "# costs (docs/METHODS.md §4.7 Declared drafter costs) and §2.3 Serial\n"
                                       "# speculative decoding, §2.3 Serial speculative decoding (`sd`)")
    assert len(citation_problems(here, "# docs/METHODS.md §4.6 Declared drafter costs")) == 1
    assert len(citation_problems(here, "# docs/METHODS.md §4.7.")) == 1
    assert len(citation_problems(here, "# docs/METHODS.md §10 Nothing")) == 1
    assert not citation_problems(METHODS, "as §4.7 says")


def old_citations(text: str) -> list[re.Match]:
    """Every mention of METHODS with a section number that is not `docs/METHODS.md §N`."""
    return [m for m in OLD_CITATION.finditer(text)
            if m.start() < 5 or not PROPER_CITATION.match(text, m.start() - 5)]


def test_no_citation_in_another_form():
    old = [f"{_where(p, text, m.start())}: {m.group(0)!r}" for p in project_files() if p != Path(__file__).resolve()
           for text in [_text(p)] for m in old_citations(text)]
    assert not old, f"cite as docs/METHODS.md §N Title instead: {old}"


def test_the_old_form_check_sees_every_other_form():
    for text in ("see METHODS section 5", "METHODS §3.2", "METHODS 5.1", "METHODS.md §4", "docs/METHODS.md section 4",
                 "§4.2 of METHODS", "section 4.2 of docs/METHODS.md"):
        assert old_citations(text), text
    assert not old_citations("docs/METHODS.md §4.2 Forward costs, docs/METHODS.md\n# §4.7 Declared drafter costs")


# --- documents named -------------------------------------------------------------------------------------------------


def named_documents(text: str) -> list[tuple[int, str]]:
    """(offset, path) of every document `text` names, outside URLs, anchors and trailing dots cut."""
    found = []
    for m in DOC_PATH.finditer(text):
        run_start = max(text.rfind(c, 0, m.start()) for c in " \t\n(<\"'`[")
        if "://" in text[run_start + 1:m.end()]:
            continue  # another project's file
        found.append((m.start(), m.group(0).rstrip(".")))
    return found


def resolves(path: Path, name: str) -> bool:
    if name.startswith("/"):
        return (REPO / name.lstrip("/")).exists()
    if "/" not in name and (REPO / "docs" / name).exists():
        return True
    folder = path.parent
    while True:
        if (folder / name).exists():
            return True
        if folder == REPO or REPO not in folder.parents:
            return False
        folder = folder.parent


def test_every_document_named_exists():
    missing = [f"{_where(p, text, offset)}: {name}" for p in project_files() if p != Path(__file__).resolve()
               for text in [_text(p)]
               for offset, name in named_documents(text) if not resolves(p, name)]
    assert not missing, "documents named that do not exist:\n" + "\n".join(missing)


def test_the_document_check_resolves_as_documented():
    here = REPO / "specbench" / "native" / "src" / "main.cpp"
    text = ("see native/README.md, docs/METHODS.md#5-replay and MODELS.md. "
            "report.md; https://github.com/x/y/blob/master/docs/backend/OPENCL.md")
    names = [name for _, name in named_documents(text)]
    assert names == ["native/README.md", "docs/METHODS.md", "MODELS.md"]
    assert [resolves(here, name) for name in names] == [True, True, False]
    assert resolves(REPO / "results" / "README.md", "../docs/METHODS.md")


def test_nothing_names_the_workplace_outside_the_project():
    outside = [f"{_where(p, text, m.start())}" for p in project_files() if p != Path(__file__).resolve()
               for text in [_text(p)] for m in re.finditer(r"\.\./shared\b|/work/shared\b", text)]
    assert not outside, f"paths outside the repository: {outside}"


# --- the README ------------------------------------------------------------------------------------------------------


def test_every_command_is_in_the_readme():
    from specbench.cli import COMMANDS

    readme = README.read_text(encoding="utf-8")
    missing = sorted(name for name in COMMANDS if f"specbench {name}" not in readme)
    assert not missing, f"README never mentions `specbench {missing[0]}`"


def test_the_readme_states_no_verdict_of_its_own():
    """A verdict belongs to a run (its profile's costs), not to the README: the same demo paid on one host and not on
    another. Dated figures live in docs/MEASUREMENTS.md with their host."""
    readme = README.read_text(encoding="utf-8")
    assert not re.search(r"\bnothing pays\b|\b\d\.\d+×", readme, re.I), "a measured verdict or ratio in the README"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", readme), "a dated measurement in the README: docs/MEASUREMENTS.md"
