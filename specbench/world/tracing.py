"""Trace windows with the real models: windows.jsonl -> traces/<drafter>.jsonl.

Text windows become prompts with each model's own tokenizer and chat template (the
runner's `tokenize` mode). Which template a model uses (`chat_template`): the one named
for it (`--template NAME=TEMPLATE`), else the windows' `template` when it names a
llama.cpp built-in, else the one stored in its GGUF; a GGUF that stores none is an error
naming the file and the flag. The trace header records each model's template. The
runner's `trace` mode then records y, the prefix-conditioned drafts and the producer
stream per window; each window is appended (and flushed) as soon as it is done, so an
interrupted trace resumes with `resume=True` where it stopped. The header records the
trace's key (runner build, windows digest, k_max, SpecASR configurations; with the models and
templates, all its decisions depend on), so a finished trace of the same key is reused
instead of traced again (world/trace_cache.py), and `shard` traces one of N window shards.

The prompt-lookup drafter (`--drafter pld`) has no model: the runner traces the target
alone and records the lookup's rows over the target's prompt ids, which are checked here
against the Python reference (`core.methods.lookup.lookup_rows`) before a line is written,
and its AS2D producer stream: the window's input view alone in the target's tokens
(`Prompts.input`), which it publishes whole.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specbench.core.methods import lookup
from specbench.core.methods.configs import SpecAsrConfig
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where
from specbench.schemas.traces import (
    ModelRef,
    Shard,
    TraceFile,
    TraceWriter,
    Vocab,
    window_trace_from_dict,
    window_trace_to_dict,
)
from specbench.schemas.windows import MODEL_TEMPLATE, Window
from specbench.world.devices.base import Device
from specbench.world.environment import loaded_models, now, session
from specbench.world.jobs import TokenizeJob, TraceJob
from specbench.world.model_files import WHISPER, ModelFile, model_job, whisper_n_vocab
from specbench.world.trace_cache import REUSED, reusable, shard_windows, store, trace_key

Progress = Callable[[int], None]
WHISPER_PROMPT = "whisper-task"
"""The 'template' a trace records for a whisper.cpp model: its fixed task prompt after the audio."""
MEDIA_MARKER = "<__media__>"
"""Where libmtmd puts the audio in an audio window's prompt text."""


def user_message(window: Window) -> str:
    """The one user turn a window sends: for text, the instruction, a blank line, the source
    text (the source text alone when the instruction is empty: a prompt file's request is its
    text); for audio, the media marker alone (the instruction goes in the system turn:
    Qwen3-ASR's ChatML prompt `<|im_start|>system\n{context}<|im_end|>\n<|im_start|>user\n
    <__media__><|im_end|>\n<|im_start|>assistant\n`, context = the instruction)."""
    if window.input.kind == "audio":
        return MEDIA_MARKER
    if not window.instruction:
        return window.input.text or ""
    return f"{window.instruction}\n\n{window.input.text}"


def chat_template(model: ModelFile, windows: Sequence[Window]) -> str:
    """The template `model` renders `windows` with: the one named for it, else the windows'
    (a built-in name, or "model" for its GGUF's own). One per model, as a trace header records. A
    whisper.cpp model has none: it decodes after its own task tokens (WHISPER_PROMPT)."""
    if model.hears_audio:
        return WHISPER_PROMPT
    if model.template:
        return model.template
    named = sorted({w.template for w in windows})
    if len(named) > 1:
        raise SpecbenchError(f"the windows name different templates ({', '.join(named)}); a run renders each "
                             f"model's prompts with one", hint=f"name one for '{model.name}' with --template "
                                                               f"{model.name}=TEMPLATE, or give the windows one")
    return named[0] if named else MODEL_TEMPLATE


def tokenize_windows(device: Device, model: ModelFile, windows: Sequence[Window]) -> dict[str, list[int] | str]:
    """Per window id, the model's chat template applied: the prompt token ids of a text
    window, or the prompt text (with the media marker) of an audio window, which the runner
    tokenizes itself through the model's mmproj."""
    if model.hears_audio:
        return whisper_prompts(model, windows)
    template = chat_template(model, windows)
    prompts: dict[str, list[int] | str] = {}
    groups: dict[str, list[Window]] = {}
    for window in windows:
        groups.setdefault(window.instruction if window.input.kind == "audio" else "", []).append(window)
    for system, group in groups.items():
        job = TokenizeJob({"path": device.model_path(model.path)}, [user_message(w) for w in group], True,
                          "" if template == MODEL_TEMPLATE else template, system)
        try:
            out = device.run_job(job.to_dict())
        except SpecbenchError as exc:
            raise template_error(model, template, exc) from None
        results = sorted(out.results, key=lambda r: r["index"])
        if len(results) != len(group):
            raise SpecbenchError(f"runner tokenized {len(results)} of {len(group)} prompts")
        for window, result in zip(group, results, strict=False):
            prompts[window.window_id] = str(result["text"]) if window.input.kind == "audio" else \
                [int(t) for t in result["tokens"]]
            if window.input.kind != "audio":
                check_context(model, window, len(result["tokens"]), int(result["n_ctx_train"]))
    return prompts


def whisper_prompts(model: ModelFile, windows: Sequence[Window]) -> dict[str, list[int] | str]:
    """A whisper.cpp model hears each window through its own encoder and decodes after its fixed task prompt
    (<|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>, the runner's): no prompt text, no template.
    Text windows are refused: Whisper transcribes audio."""
    text = next((w for w in windows if w.input.kind != "audio"), None)
    if text is not None:
        raise SpecbenchError(f"window '{text.window_id}' is text, but {model.path} is a Whisper model (whisper.cpp), "
                             "which transcribes audio windows only", hint="pass audio windows, or a GGUF model")
    return {w.window_id: "" for w in windows}


def check_context(model: ModelFile, window: Window, prompt_tokens: int, context: int) -> None:
    """Refuse a window whose prompt and cap do not fit the context `model` was trained with, before
    any model work (the runner would size a context for it, far slower and larger than the model's);
    `context` 0: the model's GGUF records none, nothing to check against."""
    if context and prompt_tokens + window.cap > context:
        raise SpecbenchError(f"window '{window.window_id}': its prompt is {prompt_tokens} tokens for {model.name} "
                             f"and its cap {window.cap}, {prompt_tokens + window.cap} in all, beyond the model's "
                             f"context of {context} tokens", hint="shorten the window's text or lower its cap")


def tokenize_inputs(device: Device, model: ModelFile, windows: Sequence[Window]) -> dict[str, list[int]]:
    """Per text window id, its input view alone (no instruction, no chat template, no special
    tokens) in the model's tokens: what the lookup drafter's AS2D producer publishes."""
    text = [w for w in windows if w.input.kind != "audio"]
    if not text:
        return {}
    job = TokenizeJob({"path": device.model_path(model.path)}, [w.input.text or "" for w in text], False,
                      add_special=False, parse_special=False)
    results = sorted(device.run_job(job.to_dict()).results, key=lambda r: r["index"])
    if len(results) != len(text):
        raise SpecbenchError(f"runner tokenized {len(results)} of {len(text)} inputs")
    return {w.window_id: [int(t) for t in r["tokens"]] for w, r in zip(text, results, strict=False)}


def template_error(model: ModelFile, template: str, exc: SpecbenchError) -> SpecbenchError:
    """A runner refusal of a chat template, said in terms of the model file and the flag."""
    message = str(exc.args[0]) if exc.args else ""
    flag = f"--template {model.name}=TEMPLATE"
    if "no chat template" in message:
        unnamed = "" if model.template else f", and none is named for model '{model.name}'"
        return SpecbenchError(f"{model.path} stores no chat template{unnamed}",
                              hint=f"pass {flag} naming a llama.cpp built-in template (gemma for Gemma models; "
                                   f"chatml, llama3, ...)")
    if "chat template" not in message:
        return exc
    source = f"--template {model.name}={template}" if model.template else f"the windows' template '{template}'"
    what = "its GGUF's chat template" if template == MODEL_TEMPLATE else f"template '{template}'"
    return SpecbenchError(f"model '{model.name}' ({model.path}): llama.cpp cannot apply {what} ({source})",
                          hint=f"pass {flag} with a llama.cpp built-in template (chatml, gemma, llama3, ...)")


def window_pcm(window: Window) -> Path:
    """The window's 16 kHz mono samples as raw little-endian float32 (the runner's audio input),
    cached under audio/ of the specbench cache (world/dirs.py) by window sha256; the samples must still hash to the
    window's sha256 (the audio file has not changed since `specbench windows`)."""
    from specbench.world.audio import audio_window_sha256, load_window_audio
    from specbench.world.dirs import cache_dir

    path = cache_dir() / "audio" / f"{window.window_sha256}.f32"
    if path.is_file():
        return path
    view = window.input
    try:
        samples, _ = load_window_audio(Path(view.audio_path or ""), view.offset_s, view.duration_s)
    except SpecbenchError as exc:
        raise SpecbenchError(f"window '{window.window_id}': {exc.args[0]}", hint=exc.hint) from None
    sha = audio_window_sha256(samples, window.instruction, window.template, window.cap)
    if sha != window.window_sha256:
        raise SpecbenchError(f"window '{window.window_id}': the audio of {view.audio_path} no longer matches the "
                             f"window (sha256 {sha[:12]}, the window says {window.window_sha256[:12]})",
                             hint="rebuild the windows file with `specbench windows`")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.part")
    samples.astype("<f4").tofile(partial)
    os.replace(partial, path)
    return path


def check_mmproj(models: Sequence[ModelFile | None], windows: Sequence[Window]) -> None:
    """Audio windows need an mmproj for every model that hears them."""
    audio = next((w for w in windows if w.input.kind == "audio"), None)
    if audio is None:
        return
    for model in models:
        if model is not None and not model.hears_audio and model.mmproj is None:
            raise SpecbenchError(f"window '{audio.window_id}' is audio, but the model {model.path} has no mmproj",
                                 hint="pass --target-mmproj / --drafter-mmproj (the model's audio projector .gguf)")


def check_lookup_windows(drafter: ModelFile | None, windows: Sequence[Window]) -> None:
    """The lookup drafter copies from the prompt's token ids, which an audio prompt lacks."""
    audio = next((w for w in windows if w.input.kind == "audio"), None)
    if drafter is not None and drafter.lookup and audio is not None:
        raise SpecbenchError(f"window '{audio.window_id}' is audio; the drafter {drafter.name} (prompt lookup) "
                             "copies from the prompt's token ids, which an audio prompt does not have",
                             hint="use a drafter model for audio windows")


def check_lookup_rows(doc: dict, prompt: Sequence[int]) -> None:
    """The runner's lookup rows must be the Python reference's (one decision procedure)."""
    drafts = doc["drafts"]
    want = lookup.lookup_rows(prompt, doc["y"], drafts["k_max"])
    for t, row in enumerate(drafts["tokens"]):
        expected = [int(v) for v in want[t] if v != lookup.PAD]
        if row != expected:
            raise SpecbenchError(f"window '{doc['window_id']}': the runner's prompt-lookup row t={t} is {row}, the "
                                 f"Python reference (specbench.core.methods.lookup) proposes {expected}",
                                 hint="a runner built from other sources: rebuild it")


@dataclass(frozen=True)
class Prompts:
    """Prompt ids of each window for the target and (when they differ) the drafter."""

    target: dict[str, list[int] | str]
    """Prompt ids of text windows; prompt texts (with the media marker) of audio windows."""
    drafter: dict[str, list[int] | str] | None = None
    audio: dict[str, str] | None = None
    """Audio windows: the device path of the window's raw float32 16 kHz mono samples."""
    templates: dict[str, str] = field(default_factory=dict)
    """The chat template each model rendered them with ('target', and 'drafter' when given)."""
    input: dict[str, list[int]] | None = None
    """With the lookup drafter: each window's input view alone in target tokens (its AS2D stream)."""

    def runner_window(self, window: Window, reference: Sequence[int] | None = None) -> dict:
        prompt = self.target[window.window_id]
        if isinstance(prompt, str):
            if not self.audio or window.window_id not in self.audio:
                raise SpecbenchError(f"window '{window.window_id}': no audio samples prepared for the runner")
            doc = {"id": window.window_id, "audio": {"path": self.audio[window.window_id], "format": "f32"},
                   "prompt_text": prompt, "cap": window.cap}
            if self.drafter is not None and self.drafter[window.window_id] != prompt:
                doc["drafter_prompt_text"] = self.drafter[window.window_id]
        else:
            doc = {"id": window.window_id, "prompt": prompt, "cap": window.cap}
            if self.drafter is not None and self.drafter[window.window_id] != doc["prompt"]:
                doc["drafter_prompt"] = self.drafter[window.window_id]
            if self.input is not None:
                doc["input"] = self.input[window.window_id]
        if reference is not None:
            doc["reference"] = [int(t) for t in reference]
        return doc


def model_templates(target: ModelFile, drafter: ModelFile | None, windows: Sequence[Window]) -> dict[str, str]:
    """{'target': template, 'drafter': template} as prompts_for renders them (no drafter: no key;
    the lookup drafter reads the target's prompt)."""
    templates = {"target": chat_template(target, windows)}
    if drafter is not None:
        templates["drafter"] = templates["target"] if drafter.lookup else chat_template(drafter, windows)
    return templates


def prompts_for(device: Device, target: ModelFile, drafter: ModelFile | None, windows: Sequence[Window]) -> Prompts:
    """Tokenize once per distinct (model file, template) (a same-vocabulary drafter file is
    tokenized too, so a drafter with its own tokenizer only needs the runner to accept
    `drafter_prompt`)."""
    check_lookup_windows(drafter, windows)
    check_mmproj([target, drafter], windows)
    templates = model_templates(target, drafter, windows)
    target_prompts = tokenize_windows(device, target, windows)
    same = drafter is None or drafter.lookup or (Path(drafter.path).resolve() == Path(target.path).resolve()
                               and templates["drafter"] == templates["target"])
    drafter_prompts = None if same or drafter is None else tokenize_windows(device, drafter, windows)
    audio = {w.window_id: device.model_path(window_pcm(w)) for w in windows if w.input.kind == "audio"} or None
    inputs = tokenize_inputs(device, target, windows) if drafter is not None and drafter.lookup else None
    return Prompts(target_prompts, drafter_prompts, audio, templates, inputs)


def check_trace_templates(trace_files: dict[str, TraceFile], target: ModelFile, drafters: Sequence[ModelFile],
                          windows: Sequence[Window]) -> None:
    """A native run checked against traces must render the prompts as they were traced, or
    the greedy outputs (and drafts) differ: the target's as every trace recorded it, each drafter's
    as its own trace did; a trace whose header records no templates is not checked."""
    by_name = {d.name: d for d in drafters}
    for name, trace_file in trace_files.items():
        recorded = trace_file.templates or {}
        now = model_templates(target, by_name.get(name), windows)
        roles = ["target"] + (["drafter"] if name in by_name else [])
        for role in roles:
            if role in recorded and recorded[role] != now[role]:
                model_name = target.name if role == "target" else name  # the drafter role is `name`'s
                raise SpecbenchError(f"{trace_file.path}: the {role} was traced with chat template "
                                     f"'{recorded[role]}', this run renders '{now[role]}'",
                                     hint=f"pass --template {model_name}={recorded[role]}, or trace again")


def trace_doc(result: dict, window: Window, where: Where, vocab: Vocab) -> dict:
    """A runner trace record as a trace-file line: validated, padding stripped, sha256 added."""
    doc = {k: v for k, v in result.items() if k not in ("kind", "y_margin")} | {"window_sha256": window.window_sha256}
    return window_trace_to_dict(window_trace_from_dict(doc, where, vocab))


_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
"""Bytes of each fixed-size GGUF value type (8 = string and 9 = array are sized by a count)."""


def gguf_n_vocab(path: Path) -> int:
    """A GGUF model's vocabulary size, from its metadata alone: the length of
    `tokenizer.ggml.tokens`, which is what llama.cpp's `llama_vocab_n_tokens` counts (the
    runner's `loaded` event reports the same number, checked after a trace)."""
    try:
        with open(path, "rb") as handle:
            def unpack(fmt: str) -> int:
                return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]

            def skip(vtype: int) -> None:
                if vtype == 8:
                    handle.seek(unpack("<Q"), os.SEEK_CUR)
                elif vtype == 9:
                    inner, count = unpack("<I"), unpack("<Q")
                    if inner in _GGUF_SIZES:
                        handle.seek(_GGUF_SIZES[inner] * count, os.SEEK_CUR)
                    else:
                        for _ in range(count):
                            skip(inner)
                elif vtype in _GGUF_SIZES:
                    handle.seek(_GGUF_SIZES[vtype], os.SEEK_CUR)
                else:
                    raise SpecbenchError(f"{path}: unknown GGUF metadata value type {vtype}")

            if handle.read(4) != b"GGUF" or unpack("<I") < 2:
                raise SpecbenchError(f"{path}: not a GGUF file of version 2 or later")
            unpack("<Q")  # tensor count
            for _ in range(unpack("<Q")):
                key = handle.read(unpack("<Q"))
                vtype = unpack("<I")
                if key == b"tokenizer.ggml.tokens" and vtype == 9:
                    unpack("<I")
                    return unpack("<Q")
                skip(vtype)
    except FileNotFoundError:
        raise SpecbenchError(f"model file not found: {path}", hint="pass the path of a .gguf file") from None
    except struct.error:
        raise SpecbenchError(f"{path}: the GGUF metadata is cut short") from None
    raise SpecbenchError(f"{path}: no tokenizer.ggml.tokens in the GGUF metadata (a model without a vocabulary)")


def model_n_vocab(model: ModelFile) -> int:
    """The vocabulary size the runner reports on loading `model` (GGUF or whisper.cpp)."""
    path = Path(model.path)
    return whisper_n_vocab(path) if model.engine == WHISPER else gguf_n_vocab(path)


def model_refs(target: ModelFile, drafter: ModelFile) -> tuple[ModelRef, ModelRef]:
    """How a trace header names the two models: identity and vocabulary size (the prompt-lookup
    drafter drafts target tokens: the target's vocabulary)."""
    target_ref = ModelRef(**target.ref(), n_vocab=model_n_vocab(target))
    n_vocab = target_ref.n_vocab if drafter.lookup else model_n_vocab(drafter)
    return target_ref, ModelRef(**drafter.ref(), n_vocab=n_vocab)


def check_loaded_vocab(device: Device, roles: Sequence[tuple[str, ModelFile]], refs: Sequence[ModelRef]) -> None:
    """The vocabulary sizes the runner reported on loading the models are the header's."""
    seen = device.loaded()
    for (role, model), ref in zip(roles, refs, strict=False):
        event = None if model.lookup else seen.get(device.model_path(model.path))
        if event is not None and "n_vocab" in event and int(event["n_vocab"]) != ref.n_vocab:
            raise SpecbenchError(f"the runner loaded the {role} {model.path} with {event['n_vocab']} tokens, its GGUF "
                                 f"metadata lists {ref.n_vocab}")


def trace_path(out_dir: Path, drafter: ModelFile) -> Path:
    return Path(out_dir) / f"{drafter.name}.jsonl"


def trace_windows(device: Device, windows: Sequence[Window], target: ModelFile, drafter: ModelFile, out_dir: Path,
                  k_max: int = 16, resume: bool = False, threads: int | None = None,
                  progress: Progress | None = None, prompts: Prompts | None = None,
                  specasr: Sequence[SpecAsrConfig] = (), cache: Path | None = None, shard: Shard | None = None,
                  say: Callable[[str], None] | None = None) -> tuple[Path, int]:
    """Trace every window not yet in out_dir/<drafter>.jsonl; returns (file, windows traced now).

    `specasr`: configurations whose recycling queries are recorded too (the runner runs
    each one against the target's output), so that replay can price them. `cache`: the
    trace cache directory (world/trace_cache.py); a finished trace of the same key is reused
    (`say` is told which) and a new one is stored there; None: no cache. `shard`: trace only
    that shard of `windows` (the header's key still names all of them)."""
    if k_max < 1:
        raise SpecbenchError(f"--k-max {k_max}: expected at least 1 draft per row (16 covers SD up to W=17)")
    if drafter.lookup and specasr:
        raise SpecbenchError(f"--specasr with --drafter {drafter.name}: SpecASR's recycling asks a drafter model, "
                             "and the prompt-lookup drafter has none", hint="trace SpecASR with a drafter model")
    for config in specasr:
        if config.k_max > k_max:
            raise SpecbenchError(f"--specasr {config.trace_label}: k_max {config.k_max} exceeds --k-max {k_max}",
                                 hint=f"pass --k-max {config.k_max} or more")
    key = trace_key(device.runner().sha256, windows, k_max, [c.trace_label for c in specasr], threads)
    windows = shard_windows(windows, shard)
    refs = model_refs(target, drafter)
    templates = model_templates(target, drafter, windows)
    path = trace_path(out_dir, drafter)
    if cache is not None and not resume:
        reused = reusable(path, cache, key, shard, *refs, templates, windows)
        if reused is not None:
            if say:
                say(f"reusing {reused}: {REUSED}")
            if progress:
                progress(len(windows))
            return path, 0
    # Prompts before the file: a model without a chat template leaves nothing behind.
    prompts = prompts or prompts_for(device, target, drafter, windows)
    writer = TraceWriter(path, *refs, prompts.templates, resume, session(device), key, shard)
    todo = writer.todo(windows)
    if progress and len(todo) < len(windows):
        progress(len(windows) - len(todo))
    roles = [("target", target), ("drafter", drafter)]
    if not todo:
        writer.finish(now(), loaded_models(device, roles))
        if cache is not None:
            store(writer.path, cache, key, shard, *refs, prompts.templates)
        return writer.path, 0
    by_id = {w.window_id: w for w in todo}
    unique = {c.trace_label: c for c in specasr or ()}
    job = TraceJob(model_job(device, target), model_job(device, drafter), k_max, True,
                   [prompts.runner_window(w) for w in todo],
                   [{"k_max": c.k_max, "tau": c.tau} for c in unique.values()] or None, threads or None)

    def on_line(doc: dict) -> None:
        result = doc.get("result")
        if not result or result.get("kind") != "trace":
            return
        window = by_id[result["window_id"]]
        where = Where(f"runner trace of window '{window.window_id}'")
        doc = trace_doc(result, window, where, writer.vocab)
        if drafter.lookup:
            prompt = prompts.target[window.window_id]
            if isinstance(prompt, str):  # check_lookup_windows refuses audio windows with the lookup drafter
                raise SpecbenchError(f"window '{window.window_id}': prompt lookup needs the prompt's token ids")
            check_lookup_rows(doc, prompt)
        writer.append(doc)
        if progress:
            progress(1)

    device.run_job(job.to_dict(), on_line)
    missing = [w.window_id for w in todo if w.window_id not in writer.done]
    if missing:
        raise SpecbenchError(f"the runner returned no trace for window '{missing[0]}'")
    check_loaded_vocab(device, roles, refs)
    writer.finish(now(), loaded_models(device, roles))
    if cache is not None:
        store(writer.path, cache, key, shard, *refs, prompts.templates)
    return writer.path, len(todo)
