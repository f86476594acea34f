"""`specbench windows`: a windows file from a speech dataset or a prompt file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError

ONLY = {"prompts": ("--turns",), "hf": ("--split", "--audio-column", "--text-column")}
"""Options that apply to one layout alone."""
AUDIO_ONLY = ("--task", "--language", "--question", "--max-seconds")
"""Options that apply to the audio layouts alone."""


@dataclass(frozen=True)
class WindowsRequest:
    """`windows`' options, as given."""

    source: Path
    """SOURCE: the dataset directory or file, or the prompt file."""
    layout: str
    """--layout: one of LAYOUTS, or auto (detected from SOURCE)."""
    task: str | None
    """--task (None: not given; transcribe)."""
    language: str | None
    """--language: the translate task's target language."""
    question: str | None
    """--question: the answer task's question."""
    instruction: str | None
    """--instruction: instead of the task's template (prompts: instead of each record's own)."""
    template: str
    """--template: the chat template recorded in each window."""
    cap: int
    """--cap: max_new_tokens of every window."""
    max_seconds: float
    """--max-seconds: audio spans are cut to this many seconds."""
    turns: str
    """--turns: first or all (prompts)."""
    hf_split: str | None
    """--split NAME: the split of a saved DatasetDict (hf)."""
    audio_column: str
    """--audio-column (hf)."""
    text_column: str
    """--text-column (hf)."""
    dev_fraction: float
    """--dev-fraction: the share of windows in the dev split."""
    seed: int
    """--seed of the dev/test assignment."""
    dataset: str | None
    """--dataset: the name recorded in each window (None: SOURCE's name)."""
    out: Path
    """--out: the windows file to write."""
    given: tuple[str, ...] = ()
    """The options given on the command line, as flags (--turns), in --help's order: one the layout
    does not read is refused."""


def make_windows(request: WindowsRequest) -> None:
    """Build the windows of `request.source` and write them to `request.out`; stderr says how many
    of each split, and what was converted (audio) or which categories there are (prompts)."""
    from specbench.app.options import check_output_path
    from specbench.app.progress import progress_bar, stderr
    from specbench.schemas.windows import check_template, save_windows
    from specbench.world.datasets import AUDIO_LAYOUTS, READERS, build_windows, detect_layout, instruction_for

    r = request
    check_template(r.template, "--template")
    check_output_path(r.out)
    layout = detect_layout(r.source) if r.layout == "auto" else r.layout
    check_layout_options(r.given, layout)
    name = r.dataset or (r.source.stem if r.source.is_file() else r.source.name)
    if layout == "prompts":
        from specbench.world.prompts import Turns, build_prompt_windows, read_prompts

        built = build_prompt_windows(read_prompts(r.source), name, r.instruction, r.template, r.cap, Turns(r.turns),
                                     r.seed, r.dev_fraction)
    else:
        prompt = r.instruction or instruction_for(r.task or "transcribe", r.language, r.question)
        with progress_bar(f"reading {layout}", total=None) as advance:
            if layout == "hf":
                from specbench.world.hf_dataset import read_hf, removed_on_error

                audio_dir = r.out.with_name(f"{r.out.stem}-audio")
                with removed_on_error(audio_dir):
                    built = build_windows(read_hf(r.source, r.hf_split, r.audio_column, r.text_column, audio_dir),
                                          name, prompt, r.template, r.cap, r.max_seconds, r.seed, r.dev_fraction,
                                          advance)
            else:
                built = build_windows(READERS[layout](r.source), name, prompt, r.template, r.cap, r.max_seconds,
                                      r.seed, r.dev_fraction, advance)
    save_windows(r.out, built)
    dev = sum(w.split.value == "dev" for w in built)
    if layout in AUDIO_LAYOUTS:
        converted = sum(bool(w.input.conversion and (w.input.conversion["resampled"] or
                                                     w.input.conversion["downmixed"])) for w in built)
        what = f"{converted} converted to 16 kHz mono"
    else:
        categories = sorted({w.category for w in built if w.category is not None})
        what = f"{len(categories)} categor{'y' if len(categories) == 1 else 'ies'}" + (
            f": {', '.join(categories)}" if categories else "")
    stderr.print(f"{len(built)} windows ({dev} dev, {len(built) - dev} test; {what}) written to {r.out}",
                 highlight=False, markup=False)


def check_layout_options(given: tuple[str, ...], layout: str) -> None:
    """Refuse an option given on the command line that `layout` does not read."""
    from specbench.world.datasets import AUDIO_LAYOUTS

    for flag in given:
        owner = next((owner for owner, flags in ONLY.items() if flag in flags), None)
        if owner is not None and owner != layout:
            raise SpecbenchError(f"{flag} applies to --layout {owner} only, not {layout}")
        if flag in AUDIO_ONLY and layout not in AUDIO_LAYOUTS:
            raise SpecbenchError(f"{flag} applies to the audio layouts ({', '.join(AUDIO_LAYOUTS)}), not {layout}")
