"""`specbench demo`: the whole loop on this machine, no phone needed."""

from __future__ import annotations

import time
from pathlib import Path

import click

from specbench.cli.common import RESULTS
from specbench.cli.devices import runner_option
from specbench.schemas.placement import NAMED as PLACEMENTS

BUDGET_PROTOCOL = ("The paper's protocol: an AS2D budget chosen on the dev windows, deployed on the test windows "
                   "(docs/METHODS.md §8 Budget selection)")


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=RESULTS / "demo",
              show_default=True, help="Directory for windows, profile, traces, results and report.md.")
@click.option("--quick", is_flag=True,
              help="A smoke run: the first 2 dev and 1 test bundled windows, one configuration per method and "
                   "drafter (replayed and native), budgets B=1..3, profile cells at a fixed 5 forwards (no precision).")
@click.option("--placement", "placements", multiple=True, type=click.Choice(PLACEMENTS),
              help="Profile, replay and run natively in this placement only (repeatable; default: split and shared).")
@click.option("--speech", is_flag=True,
              help="The speech demo: Whisper base (whisper.cpp) with tiny.en and base's Q8_0 copy as drafters, on "
                   "the speech set (26 windows, 12 recorded, 14 synthetic; fetched and checked on first use); "
                   "each Whisper model encodes a window once per native job; WER per configuration.")
@click.option("--detail", is_flag=True, help="Print every table of the report after the summary (report.md has them).")
@runner_option
def demo(out: Path, quick: bool, placements: tuple[str, ...], speech: bool, detail: bool) -> None:
    """Profile this host, trace the bundled windows with small real models, replay and run
    the methods, and print the report: a one-screen summary with each method's verdict on
    this host, the budget protocol, and one line per kind of warning; every table is in
    OUT/report.md (--detail prints them too).

    The profiles time only the cells the demo's methods use, each until its median is known
    to +/-2% (5 to 15 forwards); the demo says which cells and how many got there. Every step
    runs in both placements (split: target and drafter on their own cores; shared: both on all
    cores) unless --placement names one.

    The first run downloads the demo models (SmolLM2 98 MB, Gemma 3 253 MB), derives the
    F16 target from SmolLM2 (271 MB) and builds the native runner (about 5 minutes on 2
    cores); later runs take about 6 minutes on a 2-core host (profiles and native runs about
    3 each), --quick about 2, --quick --placement split about 1.5. Everything is left in OUT
    for `specbench report` and friends.

    Example:

        specbench demo --out results/demo
    """
    from rich.console import Console

    from specbench.app.demo import SPEECH_SUITE, TEXT_SUITE, load_demo_results, run_demo
    from specbench.app.native import refuse_mismatches
    from specbench.app.progress import progress_bar, stderr
    from specbench.app.report import build_report
    from specbench.render.summary import print_summary
    from specbench.render.tables import print_rich, render, screen_lines

    start = time.perf_counter()
    run = run_demo(out, quick, progress_bar, lambda message: stderr.print(message, highlight=False, markup=False),
                   tuple(dict.fromkeys(placements)) or PLACEMENTS, SPEECH_SUITE if speech else TEXT_SUITE)
    built = build_report(load_demo_results(run.out))
    console = Console()
    for note in run.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    print_summary(built.summary, console)  # one screen first, then the detail tables
    protocol = [BUDGET_PROTOCOL, *(f"  {d.summary()}" for d in run.deployments)] if run.deployments else []
    for line in protocol:
        console.print(line, highlight=False, markup=False)
    if detail:
        print_rich(built.tables, console)
    else:
        for line in screen_lines(built.tables, str(run.out / "report.md")):
            console.print(line, highlight=False, markup=False)
    report = render(built.all_tables(), "md")
    if protocol:
        report = "\n".join([f"### {protocol[0]}", "", *(f"* {line.strip()}" for line in protocol[1:]), "", report])
    (run.out / "report.md").write_text(report, encoding="utf-8")
    for placement, what in run.measured.items():
        stderr.print(f"profile ({placement}) measured: {what}", highlight=False, markup=False, soft_wrap=True)
    for label, reason in run.skipped.items():
        stderr.print(f"not in this report: {label}: {reason}", highlight=False, markup=False)
    if run.divergences:
        stderr.print(f"{run.divergences} native outputs differed from the traced target output "
                     f"(see {run.out / 'results'}/native-*/divergences.jsonl)")
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in run.timings.items())
    stderr.print(f"demo finished in {time.perf_counter() - start:.1f} s ({steps}); results in {run.out}/ "
                 f"(report.md, results/replay, results/native-*)", highlight=False)
    refuse_mismatches(run.native)  # decisions that differ from the traces fail the demo, its report written
