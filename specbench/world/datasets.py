"""Speech datasets into windows: NeMo-style manifests, LibriSpeech trees, Kaldi directories (and,
in their own modules, Hugging Face datasets saved to disk, `hf_dataset.py`, and text prompt files,
`prompts.py`).

Each reader yields utterances (audio span + reference text) and names the file and line
of anything wrong; a bad entry is an error, never a silently dropped window. `build_windows`
then cuts spans to a maximum length, attaches the task's instruction, assigns dev/test
splits from a seeded hash of the window id (independent of order), and hashes each window
over its 16 kHz mono PCM and prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import iter_json_objects
from specbench.schemas.windows import InputView, Window, split_of

TASKS = {
    "transcribe": "Transcribe the audio.",
    "translate": "Translate the speech into {language}.",
    "answer": "Listen to the audio and answer: {question}",
}
LAYOUTS = ("nemo", "librispeech", "kaldi", "hf", "prompts")
AUDIO_LAYOUTS = ("nemo", "librispeech", "kaldi", "hf")


@dataclass(frozen=True)
class Utterance:
    utterance_id: str
    audio_path: Path
    offset_s: float
    duration_s: float | None
    text: str
    """Reference text (transcript)."""
    where: str
    """File and line it came from, for error messages."""


def nonempty(text: str, where: str) -> str:
    if not text.strip():
        raise SpecbenchError(f"{where}: empty transcript", hint="fix or remove the entry; windows are never dropped")
    return text.strip()


def read_nemo(manifest: Path) -> Iterator[Utterance]:
    """One JSON object per line: audio_filepath, duration, text, optional offset."""
    base = manifest.parent
    for number, doc in iter_json_objects(manifest):
        where = f"{manifest}: line {number}"
        for field, kinds in (("audio_filepath", str), ("duration", (int, float)), ("text", str)):
            if field not in doc:
                raise SpecbenchError(f"{where}: missing field '{field}'")
            if not isinstance(doc[field], kinds) or isinstance(doc[field], bool):
                raise SpecbenchError(f"{where}: field '{field}' has the wrong type ({type(doc[field]).__name__})")
        path = Path(doc["audio_filepath"])
        yield Utterance(Path(doc["audio_filepath"]).stem if "id" not in doc else str(doc["id"]),
                        path if path.is_absolute() else base / path, float(doc.get("offset", 0.0)),
                        float(doc["duration"]), nonempty(doc["text"], where), where)


def read_librispeech(root: Path) -> Iterator[Utterance]:
    """<speaker>/<chapter>/<speaker>-<chapter>.trans.txt lines 'UTT-ID TEXT' beside UTT-ID.flac."""
    transcripts = sorted(root.rglob("*.trans.txt"))
    if not transcripts:
        raise SpecbenchError(f"{root}: no *.trans.txt files (expected a LibriSpeech-layout directory)")
    for trans in transcripts:
        for number, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{trans}: line {number}"
            utt, _, text = line.strip().partition(" ")
            audio = trans.parent / f"{utt}.flac"
            yield Utterance(utt, audio, 0.0, None, nonempty(text, where), where)


def _kaldi_table(path: Path) -> dict[str, tuple[str, str]]:
    """KEY VALUE lines -> {key: (value, 'file: line n')}."""
    table = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        key, _, value = line.strip().partition(" ")
        table[key] = (value.strip(), f"{path}: line {number}")
    return table


def read_kaldi(root: Path) -> Iterator[Utterance]:
    """wav.scp (recording -> path), text (utterance -> transcript), optional segments."""
    for name in ("wav.scp", "text"):
        if not (root / name).exists():
            raise SpecbenchError(f"{root}: missing {name} (expected a Kaldi data directory)")
    wavs = _kaldi_table(root / "wav.scp")
    texts = _kaldi_table(root / "text")
    for _key, (value, where) in wavs.items():
        if value.endswith("|"):
            raise SpecbenchError(f"{where}: piped commands in wav.scp are not supported ('{value}')",
                                 hint="convert the audio to files first")
    segments_path = root / "segments"
    if segments_path.exists():
        for utt, (value, where) in _kaldi_table(segments_path).items():
            parts = value.split()
            if len(parts) != 3:
                raise SpecbenchError(f"{where}: expected 'UTT RECORDING START END'")
            recording, start, end = parts[0], float(parts[1]), float(parts[2])
            if recording not in wavs:
                raise SpecbenchError(f"{where}: recording '{recording}' is not in wav.scp")
            if utt not in texts:
                raise SpecbenchError(f"{where}: utterance '{utt}' has no line in {root / 'text'}")
            yield Utterance(utt, _kaldi_path(root, wavs[recording][0]), start, end - start,
                            nonempty(texts[utt][0], texts[utt][1]), where)
        return
    for utt, (value, where) in wavs.items():
        if utt not in texts:
            raise SpecbenchError(f"{where}: utterance '{utt}' has no line in {root / 'text'}")
        yield Utterance(utt, _kaldi_path(root, value), 0.0, None, nonempty(texts[utt][0], texts[utt][1]), where)


def _kaldi_path(root: Path, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else root / path


READERS: dict[str, Callable[[Path], Iterator[Utterance]]] = {
    "nemo": read_nemo, "librispeech": read_librispeech, "kaldi": read_kaldi}


def detect_layout(source: Path) -> str:
    if source.is_file():
        from specbench.world.prompts import is_prompt_file

        return "prompts" if is_prompt_file(source) else "nemo"
    if (source / "wav.scp").exists():
        return "kaldi"
    if any((source / name).exists() for name in ("dataset_info.json", "dataset_dict.json")):
        return "hf"
    if any(source.rglob("*.trans.txt")):
        return "librispeech"
    raise SpecbenchError(f"{source}: cannot tell the layout (a NeMo manifest or a prompt file, a LibriSpeech tree "
                         "with *.trans.txt, a Kaldi directory with wav.scp, or a Hugging Face dataset saved to disk)",
                         hint="pass --layout")


def instruction_for(task: str, language: str | None = None, question: str | None = None) -> str:
    if task not in TASKS:
        raise SpecbenchError(f"unknown task '{task}'. Available: {', '.join(TASKS)}")
    if task == "translate" and not language:
        raise SpecbenchError("task 'translate' needs --language")
    if task == "answer" and not question:
        raise SpecbenchError("task 'answer' needs --question")
    return TASKS[task].format(language=language, question=question)


def build_windows(utterances: Iterator[Utterance], dataset: str, instruction: str, template: str, cap: int,
                  max_s: float | None, seed: int, dev_fraction: float,
                  progress: Callable[[int], None] | None = None) -> list[Window]:
    from specbench.world.audio import audio_window_sha256, load_window_audio  # numpy, scipy: not at help time

    windows, seen = [], set()
    for utt in utterances:
        if utt.utterance_id in seen:
            raise SpecbenchError(f"{utt.where}: utterance id '{utt.utterance_id}' appears twice")
        seen.add(utt.utterance_id)
        duration = utt.duration_s
        if max_s is not None and (duration is None or duration > max_s):
            duration = max_s if duration is None else min(duration, max_s)
        try:
            samples, conversion = load_window_audio(utt.audio_path, utt.offset_s, duration)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{utt.where}: {exc}") from None
        actual_s = len(samples) / 16000.0
        # a declared span must exist (duration is set whenever utt.duration_s is)
        if utt.duration_s is not None and duration is not None and actual_s < duration - 0.01:
            raise SpecbenchError(f"{utt.where}: the span {utt.offset_s:g}..{utt.offset_s + duration:g} s runs past "
                                 f"the end of {utt.audio_path} ({utt.offset_s + actual_s:.3f} s)")
        view = InputView("audio", audio_path=str(utt.audio_path), offset_s=utt.offset_s, duration_s=actual_s,
                         conversion={**conversion.to_dict(), "cut_to_s": max_s} if max_s else conversion.to_dict())
        sha = audio_window_sha256(samples, instruction, template, cap)
        windows.append(Window(utt.utterance_id, sha, view, instruction, template, cap, dataset,
                              split_of(utt.utterance_id, seed, dev_fraction), utt.text))
        if progress:
            progress(1)
    if not windows:
        raise SpecbenchError(f"no utterances found for dataset '{dataset}'")
    return windows
