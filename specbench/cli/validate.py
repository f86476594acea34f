"""`specbench validate`: replay against native runs in interleaved blocks, with a noise floor and intervals."""

from __future__ import annotations

import math
from pathlib import Path

import click

from specbench.app.options import MAX_OVERHEADS_WINDOWS, MAX_PRECISION_REPETITIONS
from specbench.app.validation_request import MAX_REPEATS, ValidationRequest
from specbench.cli.common import TEMPLATE_HELP, existing_dir, existing_file, method_options
from specbench.cli.devices import phone_options, phone_settings

REQUEST = ValidationRequest
"""Where the options' defaults live: the request's field defaults, written once."""


def _percent(ctx, param, value: float) -> float:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise click.BadParameter(f"{value}: expected a percentage > 0")
    return value


def _finite(ctx, param, value: float) -> float:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value}: expected a finite number")
    return value


@click.command()
@click.argument("windows", type=existing_file)
@click.option("--traces", "traces_dir", type=existing_dir, required=True,
              help="Traces of WINDOWS (specbench trace), one per drafter: what replay prices, and the reference "
                   "outputs the native runs are checked against.")
@click.option("--target", "target_path", type=click.Path(path_type=Path), required=True,
              help="The target model (.gguf) the traces were made with.")
@click.option("--drafter", "drafter_specs", multiple=True, metavar="NAME=PATH", required=True,
              help="A drafter as traced: NAME=PATH, or pld (prompt lookup). Repeatable.")
@method_options
@click.option("--template", "template_specs", multiple=True, metavar="NAME=TEMPLATE", help=TEMPLATE_HELP)
@click.option("--device", default=REQUEST.device, show_default=True, help="local (this host) or one phone serial.")
@click.option("--placement", "placement_specs", multiple=True, metavar="split|shared|SPEC",
              help="Where each lane runs (see `specbench profile --help`). Repeatable: blocks alternate between "
                   "placements. Default: shared.")
@click.option("--depths", default=REQUEST.depths, show_default=True, help="KV depths the profile measures.")
@click.option("--block-windows", type=click.IntRange(1), default=REQUEST.block_windows, show_default=True,
              help="Windows per block; blocks cycle through the window shards.")
@click.option("--min-blocks", type=click.IntRange(1), default=REQUEST.min_blocks, show_default=True,
              help="Blocks per placement before the stopping rule is asked (at least one per shard).")
@click.option("--max-blocks", type=click.IntRange(1), default=REQUEST.max_blocks, show_default=True,
              help="The block budget per placement.")
@click.option("--halfwidth", "halfwidth_pct", type=float, default=REQUEST.halfwidth_pct,
              show_default=True, callback=_percent,
              help="Stop when every bias interval's half-width is within this (%).")
@click.option("--probe-threshold", "probe_threshold_pct", type=float, default=REQUEST.probe_threshold_pct,
              show_default=True, callback=_percent,
              help="The least move that voids a block: a window whose probes (before and after it) both moved "
                   "from their model's probes around the block's refreshes, the same way, by more than this (%) "
                   "and more than --probe-spreads times the scatter of the model's probes voids it.")
@click.option("--probe-spreads", type=click.FloatRange(0), default=REQUEST.probe_spreads,
              show_default=True, callback=_finite,
              help="How many times the scatter of a model's probes in the block (a robust standard deviation "
                   "of each probe from its own job's median) a window's probes may move before the block is "
                   "voided; 0: --probe-threshold alone.")
@click.option("--max-voids", type=click.IntRange(0), default=REQUEST.max_voids, show_default=True,
              help="Redos of a voided block; the last attempt is kept and flagged.")
@click.option("--cooldown", "cooldown_s", type=click.FloatRange(0), default=REQUEST.cooldown_s, show_default=True,
              help="Seconds to wait before redoing a voided block (phones then also wait for their thermal "
                   "zones to come back within 3 °C of the block's start).")
@click.option("--repetitions", type=click.IntRange(5), default=REQUEST.repetitions, show_default=True,
              help="Timed forwards per profile cell, in the full profile and in each refresh.")
@click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="Profile cells to this precision as `profile --precision` does (--repetitions the minimum); "
                   "default: a fixed --repetitions per cell.")
@click.option("--max-repetitions", type=click.IntRange(5, MAX_PRECISION_REPETITIONS),
              default=REQUEST.max_repetitions, show_default=True,
              help="With --precision: most timed forwards a cell takes.")
@click.option("--overheads-windows", type=click.IntRange(1, MAX_OVERHEADS_WINDOWS), default=REQUEST.overheads_windows,
              show_default=True,
              help="As `profile --overheads-windows`: the full profile's and each refresh's overheads decodes.")
@click.option("--probe-repetitions", type=click.IntRange(3), default=REQUEST.probe_repetitions, show_default=True,
              help="Width-1 forwards per model in one probe (its median).")
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), default=REQUEST.repeats, show_default=True,
              help="Passes of each of a block's two native runs Na and Nb over its windows (Na, Nb, Na, Nb, "
                   "...); a run's value is over all of its passes: the host's jitter between them averages out, "
                   "which narrows F0 and E's bound, and the decodes take this many times as long.")
@click.option("--speedup-bound", type=float, default=REQUEST.speedup_bound_pct, show_default=True, callback=_percent,
              help="Speedup verdict: the bias's 90% interval must lie within ±this (%).")
@click.option("--throughput-bound", type=float, default=REQUEST.throughput_bound_pct,
              show_default=True, callback=_percent,
              help="Throughput verdict: the bias's 90% interval must lie within ±this (%).")
@click.option("--error-bound", type=float, default=REQUEST.error_bound_pct, show_default=True, callback=_percent,
              help="Both verdicts: the excess error's upper 95% bound must be below this (%).")
@click.option("--seed", type=int, default=REQUEST.seed, show_default=True, help="Seed of the blocks' random orders.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Validation directory (default: results/validate-<device>).")
@click.option("--resume", is_flag=True, help="Continue a validation in --out (finished blocks are kept); --min-blocks, "
                                                "--max-blocks and --halfwidth may change, to add blocks.")
@phone_options
def validate(windows: Path, traces_dir: Path, target_path: Path, drafter_specs: tuple[str, ...],
             method_names: str | None, method_specs: tuple[str, ...], template_specs: tuple[str, ...], device: str,
             placement_specs: tuple[str, ...], depths: str, block_windows: int, min_blocks: int, max_blocks: int,
             halfwidth_pct: float, probe_threshold_pct: float, probe_spreads: float, max_voids: int, cooldown_s: float,
             repetitions: int, precision: float | None, max_repetitions: int, overheads_windows: int,
             probe_repetitions: int, repeats: int,
             speedup_bound: float, throughput_bound: float, error_bound: float, seed: int,
             out: Path | None, resume: bool) -> None:
    """Does replay predict what DEVICE measures? Replay against native runs, in blocks.

    Each block (one shard of WINDOWS, one placement): a refresh of the profile's cost
    cells (and of AS2D's co-scheduling ratios), two native runs Na and Nb of every
    configuration, each a pass over the block's windows (a random order, Nb reversed, each
    configuration beside a target-only decode of its own), another refresh. Replay prices
    the block from the mean of its refreshes. Reference probes run before and after every
    window and refresh; a block where both probes around a window moved from those around
    the refreshes beyond an allowance (--probe-threshold, or --probe-spreads times the
    probes' scatter in the block, whichever is larger) is voided and redone.
    Blocks repeat until every bias interval is within --halfwidth or --max-blocks is spent.

    It reports, per placement and configuration, for the speedup over target-only and for
    tokens/s: the floor F0 (Na against Nb), replay's error F1, the excess error E over the
    floor and the bias b (geometric mean of replay/native), with Student t intervals over
    the blocks' means, and a verdict: "within ±X%" only when b's 90% interval lies inside ±X%
    and E's upper 95% bound is below --error-bound; otherwise what was shown and the floor
    in the way. Tables go to stdout (and OUT/validation.md), figures to OUT/figures.

    Example:

        specbench validate windows.jsonl --traces traces/ --target models/target.gguf
        --drafter small=models/draft.gguf --method 'sd:W=5' --method 'as2d:B=3'
        --placement split --placement shared --out results/validate-local
    """
    from rich.console import Console

    from specbench.app.validation_request import validate as validate_request
    from specbench.render.tables import print_rich

    tables = validate_request(ValidationRequest(
        windows=windows, traces_dir=traces_dir, target=target_path, drafter_specs=drafter_specs,
        method_names=method_names, method_specs=method_specs, template_specs=template_specs, device=device,
        placement_specs=placement_specs, depths=depths, block_windows=block_windows, min_blocks=min_blocks,
        max_blocks=max_blocks, halfwidth_pct=halfwidth_pct, probe_threshold_pct=probe_threshold_pct,
        probe_spreads=probe_spreads, max_voids=max_voids, cooldown_s=cooldown_s, repetitions=repetitions,
        precision=precision, max_repetitions=max_repetitions, overheads_windows=overheads_windows,
        probe_repetitions=probe_repetitions, repeats=repeats,
        speedup_bound_pct=speedup_bound, throughput_bound_pct=throughput_bound, error_bound_pct=error_bound,
        seed=seed, out=out, resume=resume, phone=phone_settings()))
    print_rich(tables, Console())
