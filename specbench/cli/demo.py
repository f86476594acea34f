"""`specbench demo`: the whole loop on this machine, no phone needed."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.demo_request import DemoRequest
from specbench.app.options import PLACEMENTS
from specbench.cli.devices import runner_option

REQUEST = DemoRequest
"""Where the options' defaults live: the request's field defaults, written once."""


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=REQUEST.out,
              show_default=True, help="Directory for windows, profile, traces, results and report.md.")
@click.option("--quick", is_flag=True,
              help="A smoke run: the first 2 dev and 1 test bundled windows, one configuration per method and "
                   "drafter (replayed and native), budgets B=1..3, profile cells at a fixed 5 forwards (no precision).")
@click.option("--placement", "placements", multiple=True, type=click.Choice(PLACEMENTS),
              help="Profile, replay and run natively in this placement only (repeatable; default: split and shared).")
@click.option("--speech", is_flag=True,
              help="The speech demo: Whisper base (whisper.cpp) with tiny.en and base's Q8_0 copy as drafters, on "
                   "the speech set (26 windows, 12 recorded, 14 synthetic; fetched and checked on first use); "
                   "each Whisper model encodes a window once per native job; natively target, SD and AS2D with "
                   "tiny.en (the Q8_0 copy's configurations are replayed only); co-scheduling cells at a fixed 5 "
                   "forwards (AS2D is priced at the ratios the profiles' decodes realised); WER per configuration.")
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
    from specbench.app.demo import demo as demo_request

    demo_request(DemoRequest(out=out, quick=quick, placements=placements, speech=speech, detail=detail))
