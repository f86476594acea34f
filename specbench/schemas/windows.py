"""Windows: the fixed requests every method of a study decodes.

File format (`windows.jsonl`): a header line `{"kind": "specbench.windows",
"schema_version": 2}` then one window per line. A window's identity is its sha256 over
the input (source text, or the 16 kHz mono PCM for audio), the instruction, the prompt
template and the cap; results and traces carry it so unlike requests are never compared.

A window is a request (instruction + input); each model renders it into a prompt with a
chat template. The window's `template` says which: `"model"` (what `specbench windows`
writes) lets each model use its own, and a llama.cpp built-in name (e.g. `"chatml"`)
renders it with that template for every model. Per model, the first that applies wins
(`tracing.chat_template`): the template named for that model on the command line
(`--template NAME=TEMPLATE`), the window's named template, the chat template stored in
the model's GGUF; a model whose GGUF stores none and that has none named is an error.
The field is hashed as written (not as resolved per model), so a window's identity does not
depend on the models that render it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.schemas.fileio import (
    Where,
    check_header,
    dumps_line,
    from_dict,
    iter_jsonl,
    record_keys,
    reject_unknown,
    rule,
    to_dict,
    write_atomic,
)

KIND = "specbench.windows"
# Format history: 1 = first version.
# 2 = a window may carry `category` (a prompt file's category, e.g. Spec-Bench's "coding"; not hashed:
#     it groups requests, it does not change them). A version 1 file is read as version 2 without categories.
VERSION = 2
VERSIONS = (1, VERSION)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MODEL_TEMPLATE = "model"
"""Window template meaning: each model renders the request with its own chat template."""
BUILTIN_TEMPLATES = (
    "bailing", "bailing-think", "bailing2", "chatglm3", "chatglm4", "chatml", "command-r", "deepseek",
    "deepseek-ocr", "deepseek2", "deepseek3", "exaone-moe", "exaone3", "exaone4", "falcon3", "gemma", "gigachat",
    "glmedge", "gpt-oss", "granite", "granite-4.0", "granite-4.1", "grok-2", "hunyuan-dense", "hunyuan-moe",
    "hunyuan-vl", "kimi-k2", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "llama3", "llama4",
    "megrez", "minicpm", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken",
    "monarch", "openchat", "orion", "pangu-embedded", "phi3", "phi4", "rwkv-world", "seed_oss", "smolvlm",
    "solar-open", "vicuna", "vicuna-orca", "yandex", "zephyr")
"""llama.cpp's built-in chat templates at the runner's llama.cpp commit, sorted (the runner's
`--info` lists them as `chat_templates`; tests/native/test_native_runner.py keeps the two equal)."""


def check_template(template: str, where: str) -> str:
    """`template` if it is 'model' or a llama.cpp built-in name, else one line naming `where` and the names."""
    if template != MODEL_TEMPLATE and template not in BUILTIN_TEMPLATES:
        raise SpecbenchError(f"{where} = {template!r}, expected 'model' or a llama.cpp built-in chat template "
                             f"({', '.join(BUILTIN_TEMPLATES)})")
    return template


def _known_template(template: str) -> bool:
    return template == MODEL_TEMPLATE or template in BUILTIN_TEMPLATES


class Split(str, Enum):
    DEV = "dev"
    TEST = "test"


def split_of(window_id: str, seed: int, dev_fraction: float) -> Split:
    """A reproducible split: a seeded hash of the id, whatever the order of the input."""
    digest = hashlib.sha256(f"{seed}:{window_id}".encode()).digest()
    return Split.DEV if int.from_bytes(digest[:8], "big") / 2**64 < dev_fraction else Split.TEST


@dataclass(frozen=True)
class InputView:
    """What the models hear or read before the instruction."""

    kind: str = field(metadata=rule(choices=("text", "audio")))
    """'text' (a source text) or 'audio' (a span of an audio file)."""
    text: str | None = None
    """The source text, for text windows."""
    audio_path: str | None = None
    """The audio file, for audio windows."""
    offset_s: float = field(default=0.0, metadata=rule(low=0, ranged=True,
                                                        expected="seconds >= 0 (the span's start in the file)"))
    """Start of the span in the audio file, seconds."""
    duration_s: float | None = field(default=None, metadata=rule(
        low=0, above=True, ranged=True, expected="seconds > 0, or null (to the end of the file)"))
    """Length of the span, seconds (None: to the end of the file)."""
    conversion: dict | None = field(default=None, metadata=rule(omit=True))
    """How the span became 16 kHz mono (source rate/channels, resampler), for audio."""


@dataclass(frozen=True)
class Window:
    window_id: str
    """Unique within the file."""
    window_sha256: str = field(metadata=rule(check=_SHA256.match, expected="64 lowercase hex digits"))
    """sha256 over input, instruction, template and cap (see `text_window_sha256`)."""
    input: InputView
    instruction: str
    """The task text, e.g. 'Transcribe the audio.'"""
    template: str = field(metadata=rule(check=_known_template, ranged=True, expected=(
        "'model' or a llama.cpp built-in chat template (chatml, gemma, llama3, ...)")))
    """"model" (each model's own chat template) or a llama.cpp built-in template for every model."""
    cap: int = field(metadata=rule(low=1, ranged=True, expected="an integer >= 1 (max_new_tokens)"))
    """max_new_tokens: the output stops at EOS or after this many tokens."""
    dataset: str
    split: Split
    reference: str | None = field(default=None, metadata=rule(omit=True))
    """The reference answer (e.g. the transcript), for WER/CER; never shown to the models."""
    category: str | None = field(default=None, metadata=rule(check=str.strip, omit=True,
                                                            expected="a non-empty category name, or no key"))
    """The request's category in its source (e.g. "coding"), for per-category tables; None: none given.
    Not part of the hash: the same request in another category is the same request."""


def text_window_sha256(text: str, instruction: str, template: str, cap: int) -> str:
    """The identity of a text window: any change to its content changes the hash."""
    payload = json.dumps({"source_text": text, "instruction": instruction, "template": template, "cap": cap},
                         sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def windows_digest(windows: Sequence[Window]) -> str:
    """One sha256 for a whole windows file: the ordered window hashes."""
    return hashlib.sha256("\n".join(w.window_sha256 for w in windows).encode()).hexdigest()


def make_text_window(window_id: str, text: str, instruction: str, cap: int, dataset: str, split: str,
                     template: str = MODEL_TEMPLATE, reference: str | None = None,
                     category: str | None = None) -> Window:
    return Window(window_id, text_window_sha256(text, instruction, template, cap), InputView("text", text=text),
                  instruction, template, cap, dataset, Split(split), reference, category)


_WINDOW_KEYS = record_keys(Window)
_WINDOW_KEYS_V1 = _WINDOW_KEYS - {"category"}
_INPUT_KEYS = record_keys(InputView)
_VIEW_KEYS = {"text": ("kind", "text"), "audio": ("kind", "audio_path", "offset_s", "duration_s", "conversion")}
"""The keys of each kind of input, the first after `kind` required."""


def window_from_dict(doc: dict, where: Where, version: int = VERSION) -> Window:
    if version < 2:
        reject_unknown(doc, _WINDOW_KEYS_V1, where)
    window: Window = from_dict(Window, doc, where)
    view = window.input
    needed = _VIEW_KEYS[view.kind][1]
    if getattr(view, needed) is None:
        raise where.at("input").at(needed).fail("a string (missing)")
    if view.kind == "text":
        expected = text_window_sha256(view.text or "", window.instruction, window.template, window.cap)
        if expected != window.window_sha256:
            raise where.at("window_sha256").fail(f"{expected} (the hash of this window's content)",
                                                 window.window_sha256)
    return window


def window_to_dict(window: Window) -> dict:
    view = to_dict(window.input)
    return to_dict(window) | {"input": {k: view[k] for k in _VIEW_KEYS[window.input.kind] if k in view}}


def load_windows(path: Path) -> list[Window]:
    path = Path(path)
    rows = iter_jsonl(path)
    first = next(rows, None)
    if first is None:
        raise SpecbenchError(f"{path}: empty file; expected a {KIND} header line")
    version = check_header(first[1], KIND, VERSIONS, Where(path, "line 1"))
    windows: list[Window] = []
    seen: set[str] = set()
    for number, doc in rows:
        window = window_from_dict(doc, Where(path, f"line {number}"), version)
        if window.window_id in seen:
            raise Where(path, f"line {number}").at("window_id").fail("a unique id", window.window_id)
        seen.add(window.window_id)
        windows.append(window)
    if not windows:
        raise SpecbenchError(f"{path}: no windows after the header")
    return windows


def load_split(path: Path, split: str | None) -> list[Window]:
    """The windows of `path`, only those of `split` when given (at least one, or an error)."""
    windows = load_windows(path)
    if split:
        windows = [w for w in windows if w.split.value == split]
        if not windows:
            raise SpecbenchError(f"{path}: no '{split}' windows")
    return windows


def save_windows(path: Path, windows: Sequence[Window]) -> None:
    lines = [dumps_line({"kind": KIND, "schema_version": VERSION})]
    lines += [dumps_line(window_to_dict(w)) for w in windows]
    write_atomic(Path(path), "".join(lines))
