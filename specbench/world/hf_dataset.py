"""A Hugging Face dataset saved to disk (`Dataset.save_to_disk`) into utterances for windows.

The dataset (or one split of a `DatasetDict`) holds an audio column and a text column (the
references). An audio value is one of: an `Audio` feature's file (read undecoded, as its bytes or
its path, so no decoder of the `datasets` library is needed), a mapping with `array` and
`sampling_rate` (mono samples, or channels x samples), or a path string (relative to the
dataset's directory). A window names an audio file, so bytes and arrays are first written to
files under `audio_dir`: bytes as they are, arrays as 32-bit float WAV at their own rate (every
sample kept); `datasets.build_windows` then converts, cuts and hashes them like any other layout.
Ids come from an `id` column when there is one, else `SPLIT-N` (`row-N` without splits; N the row
number from 0).
"""

from __future__ import annotations

import contextlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError
from specbench.extras import require
from specbench.world.datasets import Utterance, nonempty

ID_COLUMN = "id"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def open_split(root: Path, split: str | None) -> tuple[Any, str | None]:
    """(the dataset of `split`, the split's name: None for a dataset without splits) of the dataset saved
    at `root`."""
    datasets = require("datasets", "hf", "--layout hf (a Hugging Face dataset saved to disk)")
    datasets.disable_progress_bars()
    try:
        loaded = datasets.load_from_disk(str(root))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise SpecbenchError(f"{root}: not a dataset saved with save_to_disk ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        if split is None and len(names) == 1:
            split = names[0]
        if split not in loaded:
            asked = "no --split given" if split is None else f"no split '{split}'"
            raise SpecbenchError(f"{root}: {asked} (splits: {', '.join(names)})", hint="pass --split NAME")
        return loaded[split], split
    if split is not None:
        raise SpecbenchError(f"{root}: --split {split}, but the dataset saved there has no splits",
                             hint="leave out --split")
    return loaded, None


def check_columns(dataset: Any, root: Path, audio_column: str, text_column: str) -> None:
    """Both columns exist, or one line naming the missing one and the columns there are."""
    for option, column in (("--audio-column", audio_column), ("--text-column", text_column)):
        if column not in dataset.column_names:
            raise SpecbenchError(f"{root}: no column '{column}' ({option}; columns: "
                                 f"{', '.join(dataset.column_names)})", hint=f"name the column with {option}")


def read_hf(root: Path, split: str | None, audio_column: str, text_column: str,
            audio_dir: Path) -> Iterator[Utterance]:
    """The utterances of the dataset at `root`; bytes and arrays are written into `audio_dir`."""
    datasets = require("datasets", "hf", "--layout hf (a Hugging Face dataset saved to disk)")
    dataset, name = open_split(root, split)
    check_columns(dataset, root, audio_column, text_column)
    if isinstance(dataset.features[audio_column], datasets.Audio):
        dataset = dataset.cast_column(audio_column, datasets.Audio(decode=False))
    ids = dataset[ID_COLUMN] if ID_COLUMN in dataset.column_names else None
    for index, row in enumerate(dataset):
        where = f"{root}: {name + ' ' if name else ''}row {index}"
        utterance_id = str(ids[index]) if ids is not None else f"{name or 'row'}-{index}"
        text = row[text_column]
        if not isinstance(text, str):
            raise SpecbenchError(f"{where}: column '{text_column}' = {str(text)[:40]!r}, expected a string "
                                 "(the reference text)")
        path = _audio_file(row[audio_column], root, audio_dir, utterance_id, where, audio_column)
        yield Utterance(utterance_id, path, 0.0, None, nonempty(text, where), where)


def _audio_file(value: Any, root: Path, audio_dir: Path, utterance_id: str, where: str, column: str) -> Path:
    """The file one audio value stands for (written into `audio_dir` when it is bytes or an array)."""
    stem = _SAFE.sub("_", utterance_id) or "audio"
    if isinstance(value, str):
        return _resolve(value, root)
    if isinstance(value, dict) and value.get("bytes") is not None:
        suffix = Path(str(value.get("path") or "")).suffix or ".bin"
        audio_dir.mkdir(parents=True, exist_ok=True)
        out = audio_dir / f"{stem}{suffix}"
        out.write_bytes(value["bytes"])
        return out
    if isinstance(value, dict) and value.get("array") is not None:
        return _write_array(value, audio_dir / f"{stem}.wav", where, column)
    if isinstance(value, dict) and value.get("path"):
        return _resolve(str(value["path"]), root)
    raise SpecbenchError(f"{where}: column '{column}' holds {type(value).__name__}, expected audio: an Audio "
                         "feature, a mapping with 'array' and 'sampling_rate', or a path")


@contextlib.contextmanager
def removed_on_error(audio_dir: Path) -> Iterator[None]:
    """Remove `audio_dir` if what runs inside fails and the directory did not exist before it: a bad
    dataset leaves nothing written."""
    existed = audio_dir.exists()
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(audio_dir, ignore_errors=True)
        raise


def _resolve(path: str, root: Path) -> Path:
    found = Path(path)
    return found if found.is_absolute() else root / found


def _write_array(value: dict, out: Path, where: str, column: str) -> Path:
    import numpy as np

    soundfile = require("soundfile", "audio", "writing a dataset's audio arrays to files")
    rate = value.get("sampling_rate")
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise SpecbenchError(f"{where}: column '{column}': sampling_rate = {rate!r}, expected an integer >= 1 (Hz)")
    samples = np.asarray(value["array"], dtype=np.float32)
    if samples.ndim == 2:
        samples = samples.T  # datasets keeps channels x samples; soundfile writes frames x channels
    if samples.ndim not in (1, 2) or samples.shape[0] == 0:
        raise SpecbenchError(f"{where}: column '{column}': array of shape {samples.shape}, expected samples "
                             "(or channels x samples)")
    out.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(out), samples, rate, subtype="FLOAT")
    return out
