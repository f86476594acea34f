"""`specbench --help` and every `specbench CMD --help` start light: click and the package's own
light modules, none of the heavy libraries (bench/startup.py times them; this checks what loads).

Each help runs as `python -X importtime -m specbench ...` in a fresh interpreter, and the
modules it imported are read from the import-time log on stderr.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from specbench.cli import COMMANDS

HEAVY = ("numpy", "pandas", "scipy", "jiwer", "rich", "matplotlib", "yaml", "adbutils", "soundfile", "tabulate",
         "datasets", "pyarrow")


def imported_by(*args: str) -> tuple[str, set[str]]:
    """(stdout, top-level names of every module imported) of `python -m specbench ARGS`."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "specbench", *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    names = {line.rpartition("|")[2].strip().split(".")[0]
             for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "click" in names, "the import-time log was not read"  # the probe itself works
    return done.stdout, names


def test_the_main_help_lists_every_command_and_loads_no_heavy_library():
    out, names = imported_by("--help")
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
    listed = [line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)
    assert "specbench" in names and not any(n.startswith("specbench.app") for n in names)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_help_loads_no_heavy_library(command):
    out, names = imported_by(command, "--help")
    assert f"Usage: specbench {command}" in out
    assert not names & set(HEAVY), f"specbench {command} --help imports {sorted(names & set(HEAVY))}"


def test_a_command_runs_after_loading_lazily():
    # the heavy libraries arrive with the work: `report` on a missing directory still fails cleanly
    done = subprocess.run([sys.executable, "-m", "specbench", "report", "no/such/dir"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "'no/such/dir' does not exist" in done.stderr


def test_the_light_tables_are_the_librarys():
    """What the help offers before the library loads is what the library accepts."""
    from specbench.cli.common import DEFAULT_METHODS
    from specbench.core.methods.configs import REGISTRY
    from specbench.render.formats import OUTPUT_FORMATS
    from specbench.render.tables import TEXT_FORMATS, render
    from specbench.world.datasets import AUDIO_LAYOUTS, LAYOUTS, READERS

    assert DEFAULT_METHODS == tuple(REGISTRY)
    assert OUTPUT_FORMATS[0] == "table" and set(OUTPUT_FORMATS[1:]) == {*TEXT_FORMATS, "csv"}
    assert all(isinstance(render([], fmt), str) for fmt in TEXT_FORMATS)
    # the file and directory readers, then the layouts with a module and options of their own
    assert LAYOUTS == (*READERS, "hf", "prompts") and AUDIO_LAYOUTS == (*READERS, "hf")


def test_the_command_table_names_each_command_as_it_is_invoked():
    import click

    from specbench.cli import main

    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
    assert all(main.get_command(ctx, name).name == name for name in COMMANDS)
    assert main.get_command(ctx, "no-such-command") is None
