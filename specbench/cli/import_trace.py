"""`specbench import-trace`: another decoder's logs as specbench traces."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.import_trace import IMPORT_FORMATS
from specbench.cli.common import existing_file


@click.command("import-trace")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(IMPORT_FORMATS))
@click.argument("files", type=existing_file, nargs=-1, required=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Traces directory: one <method>.jsonl per method of the exports.")
@click.option("--windows", "windows_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Windows file to write, one window per utterance (replay reads it with the traces).")
@click.option("--n-prompt", type=click.IntRange(1), required=True,
              help="Target KV entries after the prefill (audio + prompt), which prices the forwards' depths; "
                   "the exports do not record it.")
@click.option("--n-vocab", type=click.IntRange(1), required=True,
              help="The target's vocabulary size (llama.cpp's n_vocab; Qwen3: 151936): every token id is checked "
                   "against it; the exports do not record it.")
@click.option("--cap", type=click.IntRange(1), default=448, show_default=True,
              help="max_new_tokens recorded in each window (the decoder's own limit).")
@click.option("--target-sha256", default=None,
              help="sha256 of the target's GGUF that your device profile measured (default: an identity "
                   "'progdraft:<target name>').")
def import_trace(fmt: str, files: tuple[Path, ...], out: Path, windows_path: Path, n_prompt: int, n_vocab: int,
                 cap: int, target_sha256: str | None) -> None:
    """Turn another decoder's round logs into traces and a windows file.

    progdraft: ProgDraft's per-utterance exports (demo/export_replay.py): y from the
    target-only reference, a draft row at every prefix a method's rounds visited (the rest
    absent), each method's accepted counts checked against replay at W = K + 1. Every file
    is checked before anything is written.

    Example:

        specbench import-trace progdraft exports/*.json --out traces/ --windows windows.jsonl --n-prompt 320
        --n-vocab 151936
    """
    from specbench.app.import_trace import ImportRequest
    from specbench.app.import_trace import import_trace as import_request

    import_request(ImportRequest(fmt=fmt, files=files, out=out, windows=windows_path, n_prompt=n_prompt,
                                 n_vocab=n_vocab, cap=cap, target_sha256=target_sha256))
