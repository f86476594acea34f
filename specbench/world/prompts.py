"""Prompt files into text windows: JSON lines or CSV, one request (or one per turn) per record.

A record holds its request as `text` (a string) or `turns` (a list of strings, Spec-Bench's and
MT-Bench's `question.jsonl`; in a CSV cell, a JSON list), and optionally `id` or `question_id`,
`category`, `instruction` and `reference` (a string, or with `turns` a list with one reference per
turn). Other keys are left alone. `--turns first` makes one window of the first turn;
`--turns all` one window per turn, `ID-turnN`, each a request of its own (the turns before it are
not in its prompt). A window's dev/test split comes from a seeded hash of the record's id, so the
turns of one question share a split. Every window is hashed as `schemas.windows.text_window_sha256`
says; the category rides along unhashed. A record without text, a CSV without a text column, or a
duplicate id is an error naming the file and the line: no window is ever dropped.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import iter_json_objects
from specbench.schemas.windows import Window, make_text_window, split_of

TEXT_FIELDS = ("text", "turns")
"""A record's request: one of these (`text` wins when both are present)."""
ID_FIELDS = ("id", "question_id")
"""A record's id: the first of these present (else `row-N`, N its record number from 1)."""


class Turns(str, Enum):
    """Which turns of a multi-turn record become windows."""

    FIRST = "first"
    ALL = "all"


@dataclass(frozen=True)
class PromptRecord:
    """One record of a prompt file."""

    record_id: str
    turns: tuple[str, ...]
    """The request's turns (one for a `text` record), none empty."""
    category: str | None
    instruction: str | None
    """The record's own instruction (None: the command's, or none)."""
    references: tuple[str | None, ...]
    """One reference answer per turn (None where there is none)."""
    where: str
    """File and line, for error messages."""


def _string(value: object, where: str, field: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SpecbenchError(f"{where}: field '{field}' = {json.dumps(value)[:60]}, expected a string")
    return str(value)


def _record(doc: dict, where: str, number: int) -> PromptRecord:
    text = doc.get("text")
    if text is not None:
        turns = [text]
        field = "text"
    elif doc.get("turns") is not None:
        turns, field = doc["turns"], "turns"
        if isinstance(turns, str):
            turns = [turns]
        if not isinstance(turns, list) or not turns:
            raise SpecbenchError(f"{where}: field 'turns' = {json.dumps(turns)[:60]}, expected a non-empty list "
                                 "of strings")
    else:
        raise SpecbenchError(f"{where}: no text (expected a non-empty 'text' string or 'turns' list)")
    for i, turn in enumerate(turns):
        if not isinstance(turn, str) or not turn.strip():
            name = field if field == "text" else f"turns[{i}]"
            raise SpecbenchError(f"{where}: field '{name}' = {json.dumps(turn)[:60]}, expected a non-empty string")
    record_id = next((_string(doc[k], where, k) for k in ID_FIELDS if doc.get(k) not in (None, "")), None)
    reference = doc.get("reference")
    if isinstance(reference, list):
        references = tuple(_string(r, where, "reference") for r in reference)
    else:
        references = (_string(reference, where, "reference"),)
    references += (None,) * (len(turns) - len(references))
    category = _string(doc.get("category"), where, "category")
    instruction = _string(doc.get("instruction"), where, "instruction")
    return PromptRecord(record_id or f"row-{number}", tuple(turns), category.strip() or None if category else None,
                        instruction, references[:len(turns)], where)


def read_jsonl(path: Path) -> Iterator[PromptRecord]:
    """Records of a JSON-lines prompt file (blank lines skipped)."""
    for number, (line_number, doc) in enumerate(iter_json_objects(path, "a prompt record"), start=1):
        yield _record(doc, f"{path}: line {line_number}", number)


def read_csv(path: Path) -> Iterator[PromptRecord]:
    """Records of a CSV prompt file with a header row; a `turns` cell holds a JSON list of strings."""
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = reader.fieldnames or []
        if not any(c in columns for c in TEXT_FIELDS):
            raise SpecbenchError(f"{path}: no 'text' or 'turns' column (columns: {', '.join(columns) or 'none'})",
                                 hint="name the column of the prompts 'text'")
        for number, row in enumerate(reader, start=1):
            where = f"{path}: line {reader.line_num}"
            doc: dict[str, object] = {k: (v if v != "" else None) for k, v in row.items() if k is not None}
            if doc.get("text") is None and isinstance(doc.get("turns"), str):
                try:
                    doc["turns"] = json.loads(str(doc["turns"]))
                except json.JSONDecodeError as exc:
                    raise SpecbenchError(f"{where}: column 'turns' is not a JSON list ({exc.msg})") from None
            yield _record(doc, where, number)


def read_prompts(path: Path) -> Iterator[PromptRecord]:
    """A prompt file's records: CSV for a .csv file, JSON lines otherwise."""
    path = Path(path)
    if not path.is_file():
        raise SpecbenchError(f"{path}: not a file (--layout prompts reads a JSONL or CSV file)")
    return read_csv(path) if path.suffix.lower() == ".csv" else read_jsonl(path)


def is_prompt_file(path: Path) -> bool:
    """Whether `path` looks like a prompt file: a CSV, or JSON lines whose first record has a text
    field and no NeMo `audio_filepath`."""
    if path.suffix.lower() == ".csv":
        return True
    with path.open(encoding="utf-8", errors="replace") as handle:
        first = next((line for line in handle if line.strip()), "")
    try:
        doc = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(doc, dict) and "audio_filepath" not in doc and any(k in doc for k in TEXT_FIELDS)


def build_prompt_windows(records: Iterator[PromptRecord], dataset: str, instruction: str | None, template: str,
                         cap: int, turns: Turns, seed: int, dev_fraction: float) -> list[Window]:
    """One text window per record (first turn) or per turn; `instruction` (the command's) wins over a
    record's own; neither: the turn alone is the request."""
    windows: list[Window] = []
    seen: dict[str, str] = {}
    made: dict[str, str] = {}
    for record in records:
        if record.record_id in seen:
            raise SpecbenchError(f"{record.where}: id '{record.record_id}' appears twice (first at "
                                 f"{seen[record.record_id]})")
        seen[record.record_id] = record.where.rpartition(": ")[2]
        split = split_of(record.record_id, seed, dev_fraction).value
        chosen = record.turns[:1] if turns is Turns.FIRST else record.turns
        for index, text in enumerate(chosen, start=1):
            window_id = record.record_id if turns is Turns.FIRST else f"{record.record_id}-turn{index}"
            if window_id in made:
                raise SpecbenchError(f"{record.where}: window id '{window_id}' is also the id of the window made "
                                     f"at {made[window_id]}")
            made[window_id] = record.where.rpartition(": ")[2]
            windows.append(make_text_window(window_id, text, instruction or record.instruction or "", cap, dataset,
                                            split, template, record.references[index - 1], record.category))
    if not windows:
        raise SpecbenchError(f"no prompt records found for dataset '{dataset}'")
    return windows
