"""How fast is `specbench report` on a paper-sized study?

Replays the synthetic study of `bench/synthetic_study.py` (688 windows x 4 devices x 36
configurations, 99k rows), writes it as a results directory, then times in the same run:

* baseline: parsing rows.jsonl alone (json.loads of every line);
* the report: loading and validating the rows, checking comparability, every table
  (pooled, window counts, counts, D/V/O/H, oracle), rendered as Markdown;
* the figures: CDF and D/V/O/H per device, width-cost plot (PNG + SVG).

    python bench/report_speed.py [--windows 688] [--devices 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.replay_speed import CATALOG
from bench.synthetic_study import synthetic_study
from specbench.app.parallel_replay import replay_study_in_processes
from specbench.app.report import build_tables, load_many, make_figures
from specbench.core.methods.configs import parse_method_specs
from specbench.core.pricing import DEPTH_POLICY
from specbench.render.tables import to_markdown
from specbench.schemas.environment import Environment
from specbench.schemas.profiles import save_profile
from specbench.schemas.results import ProfileInput, ResultsDir, ResultsManifest, WindowsInput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=688)
    parser.add_argument("--devices", type=int, default=4)
    args = parser.parse_args()
    study = synthetic_study(n_windows=args.windows, n_devices=args.devices)
    frame = replay_study_in_processes(study.windows, study.traces, study.profiles, parse_method_specs(CATALOG))
    with tempfile.TemporaryDirectory() as tmp:
        profiles = []
        for profile in study.profiles:
            path = Path(tmp) / f"{profile.name}.yaml"
            save_profile(path, profile)
            profiles.append(ProfileInput(str(path), "synthetic", device=profile.name, placement=profile.placement))
        results = ResultsDir(Path(tmp) / "results")
        environment = Environment("0.1.0", tuple(sys.argv), None)
        results.open(ResultsManifest("replay", environment, WindowsInput("synthetic", "synthetic", len(study.windows)),
                                     tuple(CATALOG), profiles=tuple(profiles), depth_policy=DEPTH_POLICY),
                     resume=False)
        results.append_frame(frame)

        started = time.perf_counter()
        for line in results.rows_path.read_text().splitlines():
            json.loads(line)
        parse_s = time.perf_counter() - started

        started = time.perf_counter()
        loaded = load_many([results.directory])
        markdown = to_markdown(build_tables(loaded))
        report_s = time.perf_counter() - started

        started = time.perf_counter()
        figures = make_figures(loaded, Path(tmp) / "figures")
        plots_s = time.perf_counter() - started
    print(f"{len(frame):,} rows, {len(markdown.splitlines())} lines of tables, {len(figures)} figures (PNG + SVG)")
    print(f"baseline: parsing rows.jsonl alone   {parse_s:.2f} s")
    print(f"report (load + check + all tables)   {report_s:.2f} s = {report_s / parse_s:.1f}x parsing (target <= 5 s)")
    print(f"figures                              {plots_s:.2f} s (target <= 10 s)")


if __name__ == "__main__":
    main()
