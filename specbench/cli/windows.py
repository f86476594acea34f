"""`specbench windows`: build a windows file from a speech dataset or a prompt file."""

from __future__ import annotations

from pathlib import Path

import click

from specbench.app.options import LAYOUTS, TASKS


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
    from specbench.app.windows import WindowsRequest, make_windows

    make_windows(WindowsRequest(
        source=source, layout=layout, task=task, language=language, question=question, instruction=instruction,
        template=template, cap=cap, max_seconds=max_seconds, turns=turns, hf_split=hf_split,
        audio_column=audio_column, text_column=text_column, dev_fraction=dev_fraction, seed=seed, dataset=dataset,
        out=out, given=given_flags(ctx)))


def given_flags(ctx: click.Context) -> tuple[str, ...]:
    """The options given on the command line, as flags, in --help's order."""
    return tuple(p.opts[0] for p in ctx.command.params if isinstance(p, click.Option) and p.name and
                 ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE)
