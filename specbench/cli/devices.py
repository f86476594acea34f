"""`specbench devices`, and the device options `profile`/`run --native` share."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from specbench.app.options import RUNNERS_ENV, SERVER_HOST_ENV, SERVER_PORT_ENV

if TYPE_CHECKING:
    from specbench.app.options import PhoneOptions

SETTINGS_KEY = "specbench.adb_settings"


def _set_env(name: str):
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is not None:
            os.environ[name] = str(value)  # adb's own setting: adbutils and adb read it
    return callback


def adb_server_options(func):
    func = click.option("--adb-port", type=click.IntRange(1, 65535), expose_value=False, is_eager=True,
                        callback=_set_env(SERVER_PORT_ENV),
                        help=f"adb server port (default ${SERVER_PORT_ENV} or 5037).")(func)
    func = click.option("--adb-host", expose_value=False, is_eager=True, callback=_set_env(SERVER_HOST_ENV),
                        help=f"adb server host, e.g. a machine with the phones "
                             f"(default ${SERVER_HOST_ENV} or 127.0.0.1).")(func)
    return func


def runner_option(func):
    """--runner DIR: the runners directory looked in first, for this host and phones alike."""
    return click.option("--runner", type=click.Path(exists=True, file_okay=False), expose_value=False,
                        is_eager=True, callback=_set_env(RUNNERS_ENV), metavar="DIR",
                        help=f"A directory holding <abi>/specbench-runner, looked in before the user data dir "
                             f"and a checkout's runners/ (default ${RUNNERS_ENV}).")(func)


def _setting(key: str, convert: Callable = lambda v: v):
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is not None:
            ctx.meta.setdefault(SETTINGS_KEY, {})[key] = convert(value)
    return callback


def _processors(value: str) -> tuple[str, str]:
    parts = [p.strip() for p in value.split(",")]
    if len(parts) > 2 or not all(parts):
        raise click.BadParameter(f"'{value}': expected TARGET[,DRAFTER], e.g. cpu or GPUOpenCL,cpu")
    return parts[0], parts[-1]


def phone_options(func):
    """Options for jobs on phones; ignored for `local`. Stored in ctx.meta (see phone_settings)."""
    options = [
        click.option("--cores", callback=_setting("cores"), expose_value=False,
                     help="Phones: CPUs to pin the runner to: big (default; all but the slowest cluster), all, "
                          "little, prime, or numbers such as 4-7."),
        click.option("--processor", callback=_setting("processor", _processors), expose_value=False,
                     metavar="TARGET[,DRAFTER]", help="Phones: cpu (default) or a ggml GPU device name (GPUOpenCL)."),
        click.option("--cooldown-max", type=click.FloatRange(0), callback=_setting("cooldown_max_s"),
                     expose_value=False, help="Phones: longest cool-down wait between jobs, seconds (default 300)."),
        click.option("--cooldown-temp", type=float, callback=_setting("cooldown_temp_c"), expose_value=False,
                     help="Phones: wait between jobs until every thermal zone is below this, °C (default 45)."),
        click.option("--job-timeout", type=click.FloatRange(1), callback=_setting("job_timeout_s"),
                     expose_value=False, help="Phones: kill a runner job after this many seconds (default 3600)."),
    ]
    for option in options:
        func = option(func)
    return runner_option(adb_server_options(func))


def phone_settings() -> PhoneOptions:
    """The phone options the current command was given (None for those not given)."""
    from specbench.app.options import PhoneOptions

    values = dict(click.get_current_context().meta.get(SETTINGS_KEY, {}))
    if "processor" in values:
        values["target_processor"], values["drafter_processor"] = values.pop("processor")
    return PhoneOptions(**values)


@click.command()
@adb_server_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per phone instead of a table.")
def devices(as_json: bool) -> None:
    """List the phones the adb server sees: serial, state, model, SoC, ABI, Android version.

    Phones are then named by serial: `specbench profile SERIAL`, `specbench run ...
    --device SERIAL --native`. A remote adb server: --adb-host/--adb-port (or
    ANDROID_ADB_SERVER_HOST/PORT).

    Example:

        specbench devices --adb-port 5037
    """
    from specbench.app.devices import phones
    from specbench.app.progress import stderr

    rows = phones()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    if not rows:
        stderr.print("no phones attached (check `adb devices`, the cable and USB debugging)")
        return
    columns = ("serial", "state", "model", "soc", "abi", "android")
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    for values in [[c.upper() for c in columns]] + [[str(r[c]) for c in columns] for r in rows]:
        click.echo("  ".join(v.ljust(w) for v, w in zip(values, widths, strict=False)).rstrip())
