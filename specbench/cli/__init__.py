"""The `specbench` command: click wiring only; the work happens in the library."""

from __future__ import annotations

import sys

import click

from specbench import __version__
from specbench.errors import SpecbenchError


class SpecbenchGroup(click.Group):
    """Turns library errors into one clean line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SpecbenchError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("Interrupted; finished windows are saved (rerun with --resume).", err=True)
            sys.exit(130)


@click.group(cls=SpecbenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specbench")
def main() -> None:
    """Does speculative decoding pay off on your phone, and by how much?

    Profile a device, trace what real models decide, replay or run target-only, SD,
    SpecASR-style and AS2D decoding on identical windows, and compare them.
    """


def _register() -> None:
    from specbench.cli import build_runner, demo, devices, profile, report, run, select_budget, trace, windows
    from specbench.cli.import_trace import import_trace

    main.add_command(windows.windows)
    main.add_command(run.run)
    main.add_command(report.report)
    main.add_command(select_budget.select_budget)
    main.add_command(profile.profile)
    main.add_command(trace.trace)
    main.add_command(demo.demo)
    main.add_command(devices.devices)
    main.add_command(build_runner.build_runner)
    main.add_command(import_trace)


_register()
