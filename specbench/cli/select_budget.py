"""`specbench select-budget`: choose one drafter and budget per device from development windows."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import existing_dir, existing_file


@click.command("select-budget")
@click.argument("windows", type=existing_file)
@click.option("--traces", "traces_dir", type=existing_dir, required=True,
              help="Traces of WINDOWS (dev and test windows alike: the dev ones are used).")
@click.option("--profile", "profile_path", type=existing_file, required=True, help="The device's profile.")
@click.option("--catalog", default="as2d:B=1..15", show_default=True,
              help="AS2D configurations to choose from; drafter=a|b adds drafters (default: every traced drafter).")
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True,
              help="The windows to choose on: dev only (test is refused: it would flatter the results).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Budget YAML to write (default: results/budgets/<profile name>.yaml).")
def select_budget(windows: Path, traces_dir: Path, profile_path: Path, catalog: str, split: str,
                  out: Path | None) -> None:
    """Pick the AS2D drafter and budget with the best pooled throughput on the dev windows of
    WINDOWS traced in --traces.

    Test windows in the traces are left out (stderr says how many of each): a budget chosen
    on test windows would flatter the results, so --split test is refused. Ties go to the
    smaller budget. The YAML written is what `specbench run --budget` reads.

    Example:

        specbench select-budget windows.jsonl --traces traces/ --profile pixel8.yaml --out budgets/pixel8.yaml
    """
    from specbench.app.progress import stderr
    from specbench.app.study import BudgetRequest, select_budget_file

    choice, out = select_budget_file(BudgetRequest(windows=windows, traces_dir=traces_dir,
                                                   profile_path=profile_path, catalog=catalog, split=split, out=out))
    runner = f"; runner-up {choice.runners_up[0][0]} by {choice.margin_pct:.2f}%" if choice.runners_up else ""
    used = [what for what, flag in (("co-scheduling ratios", choice.extrapolated),
                                    ("KV depths", choice.depth_extrapolated)) if flag]
    note = f" (uses extrapolated {' and '.join(used)})" if used else ""
    click.echo(f"{choice.device}: {choice.config.label} at {choice.tokens_per_s:.2f} tokens/s on "
               f"{choice.windows} dev windows{runner}{note}")
    stderr.print(f"budget written to {out}")
