"""Options and helpers shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.options import DEFAULT_METHODS, METHOD_NAMES
from specbench.app.options import RESULTS as RESULTS

existing_file = click.Path(exists=True, dir_okay=False, path_type=Path)
existing_dir = click.Path(exists=True, file_okay=False, path_type=Path)


def method_options(func):
    func = click.option("--method", "method_specs", multiple=True, metavar="SPEC",
                        help="A configured method, e.g. 'sd:W=5..8,drafter=small' or 'as2d:B=1..15'. Repeatable.")(func)
    func = click.option("--methods", "method_names", default=None,
                        help=f"Comma-separated methods with default settings ({', '.join(sorted(METHOD_NAMES))}). "
                             f"Default: {','.join(DEFAULT_METHODS)} (--native: those the runner decodes), "
                             "none when --method is given.")(func)
    return func


TEMPLATE_HELP = ("A model's chat template, NAME=TEMPLATE: NAME a --drafter name or target, TEMPLATE a llama.cpp "
                 "built-in (gemma, chatml, llama3, ...) or 'model' (its GGUF's own). Repeatable. Per model: this, "
                 "else the windows' template when it names one, else the one stored in the GGUF.")
