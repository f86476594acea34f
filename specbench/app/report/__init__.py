"""What `specbench report` computes, in rooms: `inputs` (loading, comparability, references, the
runs' manifests), `rows` (the one rule choosing the rows), `tables` (every table), `replays` (the
sensitivity variants and the horizon sweep replayed again), `summary` (the one-screen summary
and its verdicts), `sustained` (the sustained-load timeline) and `outputs` (files, bundle, figures)."""

from specbench.app.report.inputs import (
    LoadedResults,
    declared_costs,
    declared_lines,
    load_many,
    selected_budgets,
)
from specbench.app.report.outputs import bundle, make_figures, write_csv_dir, write_output
from specbench.app.report.replays import add_sensitivity, horizon_tables
from specbench.app.report.rows import main_rows
from specbench.app.report.tables import (
    DECLARED,
    DIVERGENT,
    SILENT,
    TEXT_DIFFERS,
    Report,
    build_report,
    build_tables,
    horizon_report,
    pooled_table,
    position_tables,
    stability_tables,
    text_tables,
)

__all__ = ["DECLARED", "DIVERGENT", "SILENT", "TEXT_DIFFERS", "LoadedResults", "Report", "add_sensitivity",
           "build_report", "build_tables",
           "bundle", "declared_costs", "declared_lines", "horizon_report", "horizon_tables", "load_many",
           "main_rows", "make_figures", "pooled_table", "position_tables", "selected_budgets", "stability_tables",
           "text_tables", "write_csv_dir", "write_output"]
