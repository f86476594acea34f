"""`specbench windows`: build a windows file from a speech dataset or a prompt file."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.cli.common import check_output_path
from specbench.errors import SpecbenchError
from specbench.world.datasets import AUDIO_LAYOUTS, LAYOUTS, TASKS

ONLY = {"prompts": ("turns",), "hf": ("hf_split", "audio_column", "text_column")}
"""Options that apply to one layout alone."""
AUDIO_ONLY = ("task", "language", "question", "max_seconds")
"""Options that apply to the audio layouts alone."""


@click.command()
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--layout", type=click.Choice(("auto",) + LAYOUTS), default="auto", show_default=True,
              help="nemo: a JSONL manifest; librispeech: a tree of *.trans.txt + flac; kaldi: wav.scp + text; "
                   "hf: a Hugging Face dataset saved to disk; prompts: a JSONL or CSV file of text prompts.")
@click.option("--task", type=click.Choice(list(TASKS)), default=None,
              help="Audio layouts: the instruction's template.  [default: transcribe]")
@click.option("--language", default=None, help="Target language of the translate task.")
@click.option("--question", default=None, help="The question of the answer task.")
@click.option("--instruction", default=None,
              help="Instruction text instead of the task's template (prompts: instead of each record's own; "
                   "neither: the prompt alone is the request).")
@click.option("--template", default="model", show_default=True,
              help="Chat template recorded in each window: 'model' (each model's own) or a llama.cpp built-in "
                   "name (e.g. chatml) for every model.")
@click.option("--cap", type=click.IntRange(1), default=448, show_default=True, help="max_new_tokens of every window.")
@click.option("--max-seconds", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              help="Audio layouts: cut longer audio spans to this length.")
@click.option("--turns", type=click.Choice(("first", "all")), default="first", show_default=True,
              help="prompts: a record's first turn as its window, or every turn as a window of its own (ID-turnN).")
@click.option("--split", "hf_split", default=None, metavar="NAME",
              help="hf: the split of a DatasetDict to read (default: its only split).")
@click.option("--audio-column", default="audio", show_default=True,
              help="hf: the audio column (an Audio feature, {array, sampling_rate} mappings, or paths).")
@click.option("--text-column", default="text", show_default=True, help="hf: the column of reference texts.")
@click.option("--dev-fraction", type=click.FloatRange(0.0, 1.0), default=0.2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the dev/test assignment.")
@click.option("--dataset", default=None, help="Dataset name recorded in each window (default: SOURCE's name).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.pass_context
def windows(ctx: click.Context, source: Path, layout: str, task: str | None, language: str | None,
            question: str | None, instruction: str | None, template: str, cap: int, max_seconds: float, turns: str,
            hf_split: str | None, audio_column: str, text_column: str, dev_fraction: float, seed: int,
            dataset: str | None, out: Path) -> None:
    """Build a windows file from a NeMo manifest, a LibriSpeech tree, a Kaldi directory, a
    Hugging Face dataset saved to disk, or a file of text prompts.

    Audio is read with soundfile, downmixed and resampled (polyphase) to 16 kHz mono, and
    each window is hashed over that PCM and its prompt; conversions are recorded in the
    window. An hf dataset's audio held as bytes or arrays is first written as files into a
    directory beside OUT (--out w.jsonl: w-audio/; arrays as 32-bit float WAV). A prompt file is JSON lines or
    CSV: `text` or `turns` (Spec-Bench's question.jsonl), optional `id`/`question_id`,
    `category` (kept in every window and result row; `report` adds a per-category table),
    `instruction` and `reference`. Splits come from a seeded hash of the id, so they are
    reproducible.

    Example:

        specbench windows LibriSpeech/test-clean --task transcribe --max-seconds 30
        --dev-fraction 0.2 --out windows/librispeech.jsonl

        specbench windows question.jsonl --layout prompts --turns all --cap 256 --out windows/spec-bench.jsonl
    """
    from specbench.app.progress import progress_bar, stderr
    from specbench.schemas.windows import check_template, save_windows
    from specbench.world.datasets import READERS, build_windows, detect_layout, instruction_for

    check_template(template, "--template")
    check_output_path(out)
    layout = detect_layout(source) if layout == "auto" else layout
    _check_options(ctx, layout)
    name = dataset or (source.stem if source.is_file() else source.name)
    if layout == "prompts":
        from specbench.world.prompts import Turns, build_prompt_windows, read_prompts

        built = build_prompt_windows(read_prompts(source), name, instruction, template, cap, Turns(turns), seed,
                                     dev_fraction)
    else:
        prompt = instruction or instruction_for(task or "transcribe", language, question)
        with progress_bar(f"reading {layout}", total=None) as advance:
            if layout == "hf":
                from specbench.world.hf_dataset import read_hf, removed_on_error

                audio_dir = out.with_name(f"{out.stem}-audio")
                with removed_on_error(audio_dir):
                    built = build_windows(read_hf(source, hf_split, audio_column, text_column, audio_dir), name,
                                          prompt, template, cap, max_seconds, seed, dev_fraction, advance)
            else:
                built = build_windows(READERS[layout](source), name, prompt, template, cap, max_seconds, seed,
                                      dev_fraction, advance)
    save_windows(out, built)
    dev = sum(w.split.value == "dev" for w in built)
    if layout in AUDIO_LAYOUTS:
        converted = sum(bool(w.input.conversion and (w.input.conversion["resampled"] or
                                                     w.input.conversion["downmixed"])) for w in built)
        what = f"{converted} converted to 16 kHz mono"
    else:
        categories = sorted({w.category for w in built if w.category is not None})
        what = f"{len(categories)} categor{'y' if len(categories) == 1 else 'ies'}" + (
            f": {', '.join(categories)}" if categories else "")
    stderr.print(f"{len(built)} windows ({dev} dev, {len(built) - dev} test; {what}) written to {out}",
                 highlight=False, markup=False)


def _check_options(ctx: click.Context, layout: str) -> None:
    """Refuse an option given on the command line that `layout` does not read."""
    given = [p for p in ctx.command.params if p.name and
             ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE]
    for param in given:
        owner = next((owner for owner, names in ONLY.items() if param.name in names), None)
        if owner is not None and owner != layout:
            raise SpecbenchError(f"{param.opts[0]} applies to --layout {owner} only, not {layout}")
        if param.name in AUDIO_ONLY and layout not in AUDIO_LAYOUTS:
            raise SpecbenchError(f"{param.opts[0]} applies to the audio layouts ({', '.join(AUDIO_LAYOUTS)}), "
                                 f"not {layout}")
