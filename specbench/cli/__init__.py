"""The `specbench` command: click wiring only; the work happens in the library.

Subcommands load lazily (click's LazyGroup pattern): `specbench CMD` imports only CMD's
module, and the command modules import click and light helpers at the top and the library
inside their functions, so `specbench --help` and `specbench CMD --help` load no numpy,
pandas or rich (tests/test_startup.py checks it, bench/startup.py times it).
"""

from __future__ import annotations

import importlib
import signal
import sys

import click

from specbench import __version__
from specbench.errors import SpecbenchError, os_error_line

COMMANDS = {
    "windows": "specbench.cli.windows:windows",
    "run": "specbench.cli.run:run",
    "report": "specbench.cli.report:report",
    "select-budget": "specbench.cli.select_budget:select_budget",
    "profile": "specbench.cli.profile:profile",
    "trace": "specbench.cli.trace:trace",
    "merge-traces": "specbench.cli.merge_traces:merge_traces",
    "demo": "specbench.cli.demo:demo",
    "devices": "specbench.cli.devices:devices",
    "build-runner": "specbench.cli.build_runner:build_runner",
    "import-trace": "specbench.cli.import_trace:import_trace",
    "validate": "specbench.cli.validate:validate",
}
"""Command name -> "module:attribute" of its click command, imported when the command is needed."""


class SpecbenchGroup(click.Group):
    """Loads subcommands on first use, and turns library errors into one clean line on stderr and exit status 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, _, attribute = COMMANDS[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if command.name != cmd_name:  # the table and the decorator must agree, or help and invocation differ
            raise RuntimeError(f"{COMMANDS[cmd_name]} is the command {command.name!r}, not {cmd_name!r}")
        return command

    def invoke(self, ctx: click.Context):
        previous = _terminate_as_interrupt()
        try:
            return super().invoke(ctx)
        except SpecbenchError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:  # a full or read-only disk, a vanished file: one line naming the file
            click.echo(f"Error: {os_error_line(exc)}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            command = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
            if command is not None and any(p.name == "resume" for p in command.params):
                click.echo("Interrupted; finished windows are saved (rerun with --resume).", err=True)
            else:
                click.echo(f"Interrupted; {ctx.invoked_subcommand or 'specbench'} keeps only the files it finished "
                           "(run it again for the rest).", err=True)
            sys.exit(130)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _terminate_as_interrupt():
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that runner jobs are stopped and their
    temporary folders removed; returns the handler it replaced (None off the main thread)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals stay as they are
        return None


@click.group(cls=SpecbenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specbench")
def main() -> None:
    """Does speculative decoding pay off on your phone, and by how much?

    Profile a device, trace what real models decide, replay or run target-only, SD,
    SpecASR-style and AS2D decoding on identical windows, and compare them.
    """
