"""`specbench merge-traces`: one traces directory from the shard directories of `trace --shard K/N`."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("merge-traces")
@click.argument("directories", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Traces directory to write the merged files into (one per drafter).")
def merge_traces(directories: tuple[Path, ...], out: Path) -> None:
    """Merge the shard DIRECTORIES of a sharded trace into OUT.

    The shards must be of one study (the same runner, models, templates, windows and
    k_max), disjoint, and complete (every shard 1..N, every window); otherwise nothing is
    written and the one-line error names the file and the problem.

    Example:

        specbench merge-traces parts/shard-*-of-8 --out traces/
    """
    from specbench.app.progress import stderr
    from specbench.app.trace_shards import merge_shards

    for path in merge_shards(list(directories), out):
        stderr.print(f"merged {len(directories)} shards into {path}")
