"""`specbench windows`: build a windows file from a speech dataset."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import check_output_path
from specbench.world.datasets import LAYOUTS, TASKS


@click.command()
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--layout", type=click.Choice(("auto",) + LAYOUTS), default="auto", show_default=True,
              help="nemo: a JSONL manifest; librispeech: a tree of *.trans.txt + flac; kaldi: wav.scp + text.")
@click.option("--task", type=click.Choice(list(TASKS)), default="transcribe", show_default=True)
@click.option("--language", default=None, help="Target language of the translate task.")
@click.option("--question", default=None, help="The question of the answer task.")
@click.option("--instruction", default=None, help="Instruction text instead of the task's template.")
@click.option("--template", default="model", show_default=True,
              help="Chat template recorded in each window: 'model' (each model's own) or a llama.cpp built-in "
                   "name (e.g. chatml) for every model.")
@click.option("--cap", type=click.IntRange(1), default=448, show_default=True, help="max_new_tokens of every window.")
@click.option("--max-seconds", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Cut longer audio spans to this length.")
@click.option("--dev-fraction", type=click.FloatRange(0.0, 1.0), default=0.2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the dev/test assignment.")
@click.option("--dataset", default=None, help="Dataset name recorded in each window (default: SOURCE's name).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def windows(source: Path, layout: str, task: str, language: str | None, question: str | None,
            instruction: str | None, template: str, cap: int, max_seconds: float, dev_fraction: float, seed: int,
            dataset: str | None, out: Path) -> None:
    """Build a windows file from a NeMo manifest, a LibriSpeech tree or a Kaldi directory.

    Audio is read with soundfile, downmixed and resampled (polyphase) to 16 kHz mono, and
    each window is hashed over that PCM and its prompt; conversions are recorded in the
    window. Splits come from a seeded hash of the window id, so they are reproducible.

    Example:

        specbench windows LibriSpeech/test-clean --task transcribe --max-seconds 30
        --dev-fraction 0.2 --out windows/librispeech.jsonl
    """
    from specbench.app.progress import progress_bar, stderr
    from specbench.schemas.windows import check_template, save_windows
    from specbench.world.datasets import READERS, build_windows, detect_layout, instruction_for

    check_template(template, "--template")
    check_output_path(out)
    layout = detect_layout(source) if layout == "auto" else layout
    prompt = instruction or instruction_for(task, language, question)
    name = dataset or (source.stem if source.is_file() else source.name)
    with progress_bar(f"reading {layout}", total=None) as advance:
        built = build_windows(READERS[layout](source), name, prompt, template, cap, max_seconds, seed,
                              dev_fraction, advance)
    save_windows(out, built)
    dev = sum(w.split.value == "dev" for w in built)
    converted = sum(bool(w.input.conversion and (w.input.conversion["resampled"] or w.input.conversion["downmixed"]))
                    for w in built)
    stderr.print(f"{len(built)} windows ({dev} dev, {len(built) - dev} test; {converted} converted to 16 kHz mono) "
                 f"written to {out}")
