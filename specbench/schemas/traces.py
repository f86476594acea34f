"""Traces: what the real models decided for each window, free of timing (docs/METHODS.md §3 Traces).

A traces directory holds one JSONL file per (target, drafter) pair: a header line
`{"kind": "specbench.trace", "schema_version": 4, "target": {"name": ..., "sha256": ...,
"n_vocab": 49152}, "drafter": {...}, "templates": {"target": "model", "drafter": "gemma"},
"key": {"runner_sha256": ..., "windows_sha256": ..., "n_windows": 24, "k_max": 16, "specasr": []}}`
(each model's vocabulary size, against which every token id of the file is checked, the
chat template each model rendered the windows with: a llama.cpp built-in name, or "model"
for its GGUF's own, and the rest of what the runner's decisions depend on: `TraceKey`;
a shard of a sharded trace also records which one, `"shard": {"index": 2, "count": 4}`)
then one window per line with the target's greedy output `y`, the prefix-conditioned
drafts `P` (row t = the drafter's greedy continuation after prompt + y[:t], padded with -1
after the drafter's end of sequence), the producer stream `z` already mapped to the
target vocabulary, and the recorded drafter answers of SpecASR's recycling queries per
configuration. Replay reads only these; a query the trace lacks is an error.

With a drafter of another vocabulary the draft rows are mapped to target tokens, and the
drafts also carry what the drafter's forwards depend on (`CrossDrafts`): the committed
prefix in drafter tokens and the drafter tokens behind each row.

A decoder outside specbench writes the same files with `TraceWriter` (docs/METHODS.md §3 Traces):
every line it writes goes through the loader's own validation first.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from specbench.errors import SpecbenchError
from specbench.schemas.environment import KEY as ENV_KEY
from specbench.schemas.environment import Environment, LoadedModel, continued, environment_to_dict, manifest_environment
from specbench.schemas.fileio import (
    Where,
    WriterLock,
    append_jsonl,
    check_header,
    drop_cut_line,
    dumps_line,
    from_dict,
    iter_jsonl,
    need,
    reject_unknown,
    rule,
    to_dict,
    write_atomic,
)
from specbench.schemas.windows import Window

KIND = "specbench.trace"
# Format history (only the last version is read; every change of shape bumps it and adds a line):
# 1 = first version; the header's optional `templates` (the chat template of each model).
# 2 = cross-vocabulary drafts carry `step`, `drafter_tokens` and `context` (the drafter's own
#     tokens, which price its forwards); the header's optional `environment` block.
# 3 = a draft row may be null in both `tokens` and `conf` (a prefix the drafter was never
#     asked about); drafts may carry `lookup` ({name, max_ngram}) for the prompt-lookup drafter.
# 4 = the header's `target` and `drafter` carry `n_vocab`, the vocabulary size every token id
#     of the file is checked against.
# 5 = the header's optional `key` (runner build, windows digest, k_max, SpecASR configurations:
#     with the models and templates, what the runner's decisions depend on) and `shard`.
VERSION = 5
VERSIONS = (VERSION,)
PAD = -1
"""Token id that pads a draft row after the drafter's end of sequence."""
_AT_LEAST_1 = rule(low=1, ranged=True)


@dataclass(frozen=True)
class ModelRef:
    name: str
    """The model's name (a drafter's --drafter NAME, the target's file stem)."""
    sha256: str
    """sha256 of the GGUF file (or a synthetic identity for generated studies)."""
    n_vocab: int = field(metadata=_AT_LEAST_1)
    """Vocabulary size: the model's token ids are 0..n_vocab-1 (the prompt-lookup drafter,
    which drafts target tokens, has the target's)."""


@dataclass(frozen=True)
class TraceKey:
    """What a trace's decisions depend on besides the two models (header `target`, `drafter`)
    and their chat templates (header `templates`): a trace whose key, models and templates match
    is the same trace, so `specbench trace` reuses it."""

    runner_sha256: str
    """sha256 of the runner binary that decided."""
    windows_sha256: str
    """sha256 of the windows traced (all N shards together): `windows_digest`."""
    n_windows: int = field(metadata=_AT_LEAST_1)
    """How many windows that digest covers."""
    k_max: int = field(metadata=_AT_LEAST_1)
    """Drafts per prefix-conditioned row."""
    specasr: tuple[str, ...] = field(default=(), metadata=rule(expected="a list of SpecASR configuration labels"))
    """Labels of the SpecASR configurations whose recycling queries were recorded, sorted."""
    threads: int | None = field(default=None, metadata=rule(low=1, ranged=True, omit=True))
    """`trace --threads`: the threads both models decided with (None: the runner's default); Whisper's greedy
    choices can depend on them."""

    def differences(self, other: TraceKey) -> list[str]:
        """'field a vs b' for each field that differs."""
        return [f"{name} {getattr(self, name)} vs {getattr(other, name)}" for name in vars(self)
                if getattr(self, name) != getattr(other, name)]


@dataclass(frozen=True)
class Shard:
    """Which of N deterministic window shards a trace file holds (windows i with i % count == index - 1)."""

    index: int
    """1..count."""
    count: int = field(metadata=_AT_LEAST_1)
    """How many shards the windows were split into."""

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


class _Identified(Protocol):
    """What a windows digest reads: a window's id and content hash (a Window or a WindowTrace)."""

    @property
    def window_id(self) -> str: ...
    @property
    def window_sha256(self) -> str: ...


def windows_digest(windows: Sequence[_Identified]) -> str:
    """sha256 over the windows' ids and content hashes, in file order."""
    text = "".join(f"{w.window_id}\t{w.window_sha256}\n" for w in windows)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Vocab:
    """The vocabulary sizes a window line's token ids are checked against (the header's)."""

    target: int
    """y, the draft rows, the producer stream and recycled tails are target tokens."""
    drafter: int
    """A cross-vocabulary drafter's own tokens and its recycling answers are drafter tokens."""

    @classmethod
    def of(cls, target: ModelRef, drafter: ModelRef) -> Vocab:
        return cls(target.n_vocab, drafter.n_vocab)


@dataclass(frozen=True)
class CrossDrafts:
    """A cross-vocabulary drafter's side of the draft rows, in its own tokens: the runner's
    drafter forwards (widths and depths) follow from these (methods.sd.CrossVocabKV)."""

    step: np.ndarray
    """int32 [N, k_max]: drafter step (0 = the first drafter token of the row) at which each
    mapped token became stable; PAD where the row is padded."""
    drafter_tokens: tuple[np.ndarray, ...]
    """Per row: the drafter tokens its mapping consumed (step i made drafter_tokens[i])."""
    context_keep: np.ndarray
    """int32 [N]: row t's context (y[:t] retokenized by the drafter) keeps this many leading
    tokens of row t-1's context ..."""
    context_append: tuple[np.ndarray, ...]
    """... and appends these."""

    def contexts(self) -> Iterator[np.ndarray]:
        """y[:t] as drafter tokens, for t = 0, 1, ..."""
        context = np.zeros(0, dtype=np.int32)
        for keep, append in zip(self.context_keep.tolist(), self.context_append, strict=False):
            context = np.concatenate([context[:keep], append])
            yield context


@dataclass(frozen=True)
class LookupDrafts:
    """Marks draft rows made by a prompt-lookup drafter (no model; methods.lookup)."""

    name: str
    """The lookup drafter's name ('pld')."""
    max_ngram: int = field(metadata=rule(low=1, expected="an integer >= 1 (the longest n-gram matched)"))
    """The longest n-gram it matches."""


@dataclass(frozen=True)
class DraftTable:
    """Prefix-conditioned drafts: row t continues prompt + y[:t]."""

    tokens: np.ndarray
    """int32 [N, k_max]; PAD after the drafter's end of sequence."""
    conf: np.ndarray
    """float64 [N, k_max]: the drafter's top-1 probability of each token."""
    cross: CrossDrafts | None = None
    """Cross-vocabulary traces: the drafter-token side of the rows; None with a drafter of the target's vocabulary."""
    recorded: np.ndarray | None = None
    """bool [N]: False where the row is absent, a prefix the drafter was never
    asked about; None: every row recorded."""
    lookup: LookupDrafts | None = None
    """Rows of a prompt-lookup drafter (no model, every confidence 1); None: a
    model drafter's rows."""

    @property
    def k_max(self) -> int:
        return int(self.tokens.shape[1])

    def has_row(self, t: int) -> bool:
        return self.recorded is None or bool(self.recorded[t])

    def require_row(self, t: int, window_id: str, drafter: str) -> None:
        """Refuses replay of a row the trace does not hold: it is never guessed."""
        if not self.has_row(t):
            raise SpecbenchError(f"trace of window '{window_id}' (drafter {drafter}): no draft row at t={t}, the "
                                 f"drafter was never asked to continue y[:{t}] (missing context)",
                                 hint="replay a configuration that visits only the recorded prefixes (an "
                                      "imported trace holds the rows its decoder visited)")


@dataclass(frozen=True)
class ProducerStream:
    """AS2D's producer output, from the input view and instruction alone."""

    tokens: np.ndarray
    """int32 [M]: z, in the target vocabulary."""
    conf: np.ndarray
    """float64 [M]: pz, top-1 probability (the lowest of the drafter tokens a mapped token came from)."""
    step: np.ndarray
    """int32 [M], non-decreasing: index of the producer step (drafter forward) that completes each token."""
    steps: int
    """Drafter forwards the producer runs in all (>= step[-1] + 1)."""
    stop: str
    """'eos' or 'cap'."""


@dataclass(frozen=True)
class RecycleAnswer:
    """The drafter's answer to one SpecASR recycling query (context = y[:t] + correction... see methods.specasr)."""

    top1: tuple[int, ...]
    """Top-1 token after each ingested position (len(tail) + 1 entries)."""
    conf: tuple[float, ...]
    kept: int
    """Leading tail tokens the configuration kept (top-1 agrees, confidence >= tau)."""
    cont: tuple[int, ...]
    """Greedy continuation after prompt + y[:t] + tail[:kept]."""
    cont_conf: tuple[float, ...]


RecycleKey = tuple[int, tuple[int, ...]]
"""(committed tokens t after the correction, recycled tail)."""


@dataclass(frozen=True)
class WindowTrace:
    window_id: str
    window_sha256: str
    y: np.ndarray
    """int32 [N]: the target's greedy output; y[0] comes from the prefill."""
    stop_reason: str
    """'eos' or 'cap'."""
    n_prompt: int
    """Target KV entries after the initial prefill (audio + instruction)."""
    n_prompt_drafter: int
    drafts: DraftTable | None = None
    producer: ProducerStream | None = None
    recycle: Mapping[str, Mapping[RecycleKey, RecycleAnswer]] = field(default_factory=dict)
    """Recorded recycling answers per SpecASR configuration label."""
    text: str = ""
    """y detokenized by the target (special tokens left out), for WER/CER; "" when the line has none
    (the key is optional)."""

    @property
    def n_tokens(self) -> int:
        return int(self.y.shape[0])


@dataclass(frozen=True)
class TraceFile:
    target: ModelRef
    drafter: ModelRef
    windows: dict[str, WindowTrace]
    """By window_id, in file order."""
    path: Path | None = None
    templates: Mapping[str, str] | None = None
    """The chat template of the 'target' and the 'drafter' (a llama.cpp built-in name, or
    "model" for the GGUF's own); None when the header records none (the key is optional)."""
    environment: Environment | None = None
    """The header's environment block (schemas/environment.py); None when the writer recorded
    no session (a trace saved by `save_trace_file`, an import)."""
    key: TraceKey | None = None
    """What else the decisions depend on; None for a trace not made by the runner (an import)."""
    shard: Shard | None = None
    """The shard this file holds; None: every window of the key's."""


_HEADER_KEYS = frozenset({"kind", "schema_version", "target", "drafter", "templates", "notes", "key", "shard",
                          ENV_KEY})
_WINDOW_KEYS = frozenset({"window_id", "window_sha256", "y", "stop_reason", "n_prompt", "n_prompt_drafter",
                          "drafts", "producer", "recycle", "text"})


def _model_ref(doc: dict, key: str, where: Where) -> ModelRef:
    return from_dict(ModelRef, need(doc, key, dict, where), where.at(key))


def _templates(doc: dict, where: Where) -> dict[str, str] | None:
    templates = need(doc, "templates", dict, where, None)
    if templates is None:
        return None
    if set(templates) != {"target", "drafter"} or not all(isinstance(v, str) and v for v in templates.values()):
        raise where.at("templates").fail("{\"target\": NAME, \"drafter\": NAME} (chat template names)", templates)
    return {"target": templates["target"], "drafter": templates["drafter"]}


def _key(doc: dict, where: Where) -> TraceKey | None:
    key = need(doc, "key", dict, where, None)
    return None if key is None else from_dict(TraceKey, key, where.at("key"))


def _shard(doc: dict, where: Where) -> Shard | None:
    shard = need(doc, "shard", dict, where, None)
    if shard is None:
        return None
    s_where = where.at("shard")
    read: Shard = from_dict(Shard, shard, s_where)
    if not 1 <= read.index <= read.count:
        raise s_where.at("index").out_of_range(read.index, f"a shard in 1..{read.count}")
    return read


def _int_array(values: object, where: Where) -> np.ndarray:
    """int64 (a value beyond int32 is refused by the range checks, not wrapped)."""
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise where.fail("a list of integer token ids", values)
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:
        raise where.fail("integers that fit in 64 bits", values) from None


def _in_range(array: np.ndarray, low: int, high: int | None, where: Where, expected: str) -> np.ndarray:
    """`array` as int32 when every entry is in [low, high) (high None: no upper bound); else the
    first entry outside, in one line naming its index. Vectorised: one min and max per array."""
    if array.size and (array.min() < low or (high is not None and array.max() >= high)):
        bad = (array < low) if high is None else (array < low) | (array >= high)
        index = np.unravel_index(int(np.argmax(bad)), array.shape)
        for i in index:
            where = where.at(int(i))
        raise where.out_of_range(array[index].item(), expected)
    return array.astype(np.int32)


def _ids(array: np.ndarray, n_vocab: int, role: str, where: Where) -> np.ndarray:
    """Token ids of the `role` ('target' or 'drafter') vocabulary of `n_vocab` tokens."""
    return _in_range(array, 0, n_vocab, where, f"a token id in [0, {n_vocab}) ({role} vocabulary)")


def _token_ids(values: object, n_vocab: int, role: str, where: Where) -> np.ndarray:
    return _ids(_int_array(values, where), n_vocab, role, where)


def _count(doc: dict, key: str, where: Where, default: object = ..., low: int = 0) -> int:
    """An integer key that counts something: at least `low`."""
    value = need(doc, key, int, where, default)
    if value < low:
        raise where.at(key).out_of_range(value, f"an integer >= {low}")
    return value


def _prob_array(values: object, n: int, where: Where) -> np.ndarray:
    if not isinstance(values, list) or len(values) != n:
        raise where.fail(f"a list of {n} probabilities", values)
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise where.fail("a list of numbers (probabilities)", values) from None
    if array.size and not (np.isfinite(array).all() and array.min() >= 0 and array.max() <= 1):
        i = int(np.argmax(~np.isfinite(array) | (array < 0) | (array > 1)))
        raise where.at(i).out_of_range(array[i].item(), "a probability in [0, 1]")
    return array


_CROSS_KEYS = ("step", "drafter_tokens", "context")


def _rows(doc: dict, key: str, n: int, where: Where) -> list:
    rows = need(doc, key, list, where)
    if len(rows) != n:
        raise where.at(key).fail(f"{n} rows (one per committed prefix y[:t], t = 0..N-1)", f"{len(rows)} rows")
    return rows


def _cross_from(doc: dict, tokens: np.ndarray, vocab: Vocab, where: Where) -> CrossDrafts | None:
    present = [key for key in _CROSS_KEYS if key in doc]
    if not present:
        return None
    if len(present) < len(_CROSS_KEYS):
        missing = next(key for key in _CROSS_KEYS if key not in doc)
        raise where.at(missing).fail(f"present (missing; cross-vocabulary drafts carry {', '.join(_CROSS_KEYS)})")
    n, k_max = tokens.shape
    step = np.full((n, k_max), PAD, dtype=np.int32)
    drafter_tokens = []
    step_rows, drafter_rows = _rows(doc, "step", n, where), _rows(doc, "drafter_tokens", n, where)
    for t, (row, d_row) in enumerate(zip(step_rows, drafter_rows, strict=False)):
        length = int(np.sum(tokens[t] != PAD))
        steps = _int_array(row, where.at("step").at(t))
        d_tokens = _token_ids(d_row, vocab.drafter, "drafter", where.at("drafter_tokens").at(t))
        if len(steps) != length or (length and (np.any(np.diff(steps) < 0) or steps[0] < 0
                                                or steps[-1] >= len(d_tokens))):
            raise where.at("step").at(t).fail(f"{length} non-decreasing drafter steps below {len(d_tokens)} "
                                              "(one per draft token)", steps.tolist())
        step[t, :length] = steps
        drafter_tokens.append(d_tokens)
    context = need(doc, "context", dict, where)
    c_where = where.at("context")
    keep = _in_range(_int_array(_rows(context, "keep", n, c_where), c_where.at("keep")), 0, None, c_where.at("keep"),
                     "an integer >= 0 (tokens kept)")
    append = tuple(_token_ids(row, vocab.drafter, "drafter", c_where.at("append").at(t))
                   for t, row in enumerate(_rows(context, "append", n, c_where)))
    length = 0
    for t, (k, a) in enumerate(zip(keep.tolist(), append, strict=False)):
        if not 0 <= k <= length:
            raise c_where.at("keep").at(t).fail(f"0..{length} (tokens of the previous row's context)", k)
        length = k + len(a)
    return CrossDrafts(step, tuple(drafter_tokens), keep, append)


def _lookup_from(doc: dict, where: Where) -> LookupDrafts | None:
    lookup = need(doc, "lookup", dict, where, None)
    if lookup is None:
        return None
    l_where = where.at("lookup")
    read: LookupDrafts = from_dict(LookupDrafts, lookup, l_where)
    if any(key in doc for key in _CROSS_KEYS):
        raise l_where.fail("absent with cross-vocabulary fields (a lookup drafts in the target's own tokens)")
    return read


def _drafts_from(doc: dict, n: int, vocab: Vocab, where: Where) -> DraftTable:
    reject_unknown(doc, frozenset({"k_max", "tokens", "conf", "lookup", *_CROSS_KEYS}), where)
    k_max = need(doc, "k_max", int, where)
    rows = _rows(doc, "tokens", n, where)
    confs = _rows(doc, "conf", n, where)
    if k_max < 1:  # a table of no columns holds no draft
        raise where.at("k_max").fail("an integer >= 1", k_max)
    tokens = np.full((n, k_max), PAD, dtype=np.int64)
    conf = np.zeros((n, k_max), dtype=np.float64)
    recorded = np.ones(n, dtype=bool)
    for t, (row, crow) in enumerate(zip(rows, confs, strict=False)):
        if row is None or crow is None:
            if row is not None or crow is not None:
                raise where.at("tokens" if row is None else "conf").at(t).fail(
                    "null in both tokens and conf (a row never recorded), or a row in both", row if crow is None
                    else crow)
            recorded[t] = False
            continue
        if not isinstance(row, list):
            raise where.at("tokens").at(t).fail("a list of integer token ids, or null (never recorded)", row)
        if len(row) > k_max:
            raise where.at("tokens").at(t).fail(f"at most k_max={k_max} tokens", len(row))
        tokens[t, : len(row)] = _int_array(row, where.at("tokens").at(t))
        conf[t, : len(row)] = _prob_array(crow, len(row), where.at("conf").at(t))
    # one check over the whole table: ids up to each row's first PAD, PAD from there on (a
    # row ends at the drafter's end of sequence, and the runner pads it to k_max)
    is_pad = tokens == PAD
    ids = np.arange(k_max)[None, :] < np.where(is_pad.any(axis=1), np.argmax(is_pad, axis=1), k_max)[:, None]
    after = ~ids & ~is_pad
    if after.any():
        t, j = np.argwhere(after)[0]
        raise where.at("tokens").at(int(t)).at(int(j)).out_of_range(
            int(tokens[t, j]), f"{PAD} (padding, once begun, runs to the row's end)")
    tokens = np.where(ids, _ids(np.where(ids, tokens, 0), vocab.target, "target", where.at("tokens")), PAD)
    tokens = tokens.astype(np.int32)
    lookup = _lookup_from(doc, where)
    cross = _cross_from(doc, tokens, vocab, where)
    if cross is not None and not recorded.all():
        raise where.at("tokens").at(int(np.argmin(recorded))).fail(
            "a recorded row (cross-vocabulary drafts record every prefix)", None)
    return DraftTable(tokens, conf, cross, None if recorded.all() else recorded, lookup)


def _producer_from(doc: dict, vocab: Vocab, where: Where) -> ProducerStream:
    tokens = _token_ids(need(doc, "tokens", list, where), vocab.target, "target", where.at("tokens"))
    conf = _prob_array(need(doc, "conf", list, where), len(tokens), where.at("conf"))
    step = _int_array(need(doc, "step", list, where, list(range(len(tokens)))), where.at("step"))
    steps = _count(doc, "steps", where, len(tokens))
    if len(step) != len(tokens) or (len(step) and (np.any(np.diff(step) < 0) or step[0] < 0)):
        raise where.at("step").fail("one non-decreasing step index >= 0 per token", step.tolist())
    if len(step) and steps < int(step[-1]) + 1:
        raise where.at("steps").fail(f"at least {int(step[-1]) + 1} (last token's step + 1)", steps)
    stop = need(doc, "stop", str, where)
    if stop not in ("eos", "cap"):
        raise where.at("stop").fail("'eos' or 'cap'", stop)
    return ProducerStream(tokens, conf, step.astype(np.int32), steps, stop)


def _recycle_from(doc: dict, n: int, vocab: Vocab, where: Where) -> dict[str, dict[RecycleKey, RecycleAnswer]]:
    out: dict[str, dict[RecycleKey, RecycleAnswer]] = {}
    for label, queries in doc.items():
        if not isinstance(queries, list):
            raise where.at(label).fail("a list of recorded queries", queries)
        table: dict[RecycleKey, RecycleAnswer] = {}
        for i, query in enumerate(queries):
            q_where = where.at(label).at(i)
            t = need(query, "t", int, q_where)
            if not 0 <= t <= n:
                raise q_where.at("t").out_of_range(t, f"a position in [0, {n}] (tokens of y committed)")
            tail = tuple(_token_ids(need(query, "tail", list, q_where), vocab.target, "target",
                                    q_where.at("tail")).tolist())
            top1 = tuple(_token_ids(need(query, "top1", list, q_where), vocab.drafter, "drafter",
                                    q_where.at("top1")).tolist())
            if len(top1) != len(tail) + 1:
                raise q_where.at("top1").fail(f"{len(tail) + 1} tokens (one per ingested position)", len(top1))
            cont = tuple(_token_ids(need(query, "cont", list, q_where), vocab.drafter, "drafter",
                                    q_where.at("cont")).tolist())
            kept = need(query, "kept", int, q_where)
            if not 0 <= kept <= len(tail):
                raise q_where.at("kept").fail(f"0..{len(tail)} (tail tokens kept)", kept)
            conf = _prob_array(need(query, "conf", list, q_where), len(top1), q_where.at("conf"))
            cont_conf = _prob_array(need(query, "cont_conf", list, q_where), len(cont), q_where.at("cont_conf"))
            table[(t, tail)] = RecycleAnswer(top1, tuple(conf.tolist()), kept, cont, tuple(cont_conf.tolist()))
        out[label] = table
    return out


def window_trace_from_dict(doc: dict, where: Where, vocab: Vocab) -> WindowTrace:
    """One window line, every field checked; token ids against `vocab` (the header's sizes)."""
    reject_unknown(doc, _WINDOW_KEYS, where)
    y = _token_ids(need(doc, "y", list, where), vocab.target, "target", where.at("y"))
    if len(y) == 0:
        raise where.at("y").fail("at least one token (y[0] comes from the prefill)", [])
    stop = need(doc, "stop_reason", str, where)
    if stop not in ("eos", "cap"):
        raise where.at("stop_reason").fail("'eos' or 'cap'", stop)
    drafts = need(doc, "drafts", dict, where, None)
    producer = need(doc, "producer", dict, where, None)
    n_prompt = _count(doc, "n_prompt", where)
    return WindowTrace(
        window_id=need(doc, "window_id", str, where), window_sha256=need(doc, "window_sha256", str, where),
        y=y, stop_reason=stop, n_prompt=n_prompt, n_prompt_drafter=_count(doc, "n_prompt_drafter", where, n_prompt),
        drafts=None if drafts is None else _drafts_from(drafts, len(y), vocab, where.at("drafts")),
        producer=None if producer is None else _producer_from(producer, vocab, where.at("producer")),
        recycle=_recycle_from(need(doc, "recycle", dict, where, {}), len(y), vocab, where.at("recycle")),
        text=need(doc, "text", str, where, ""))


def window_trace_to_dict(trace: WindowTrace) -> dict:
    doc: dict = {"window_id": trace.window_id, "window_sha256": trace.window_sha256, "y": trace.y.tolist(),
                 "stop_reason": trace.stop_reason, "n_prompt": trace.n_prompt,
                 "n_prompt_drafter": trace.n_prompt_drafter}
    if trace.drafts is not None:
        rows: list[list[int] | None] = []
        confs: list[list[float] | None] = []
        lengths: list[int] = []
        for t, (tokens, conf) in enumerate(zip(trace.drafts.tokens, trace.drafts.conf, strict=False)):
            if not trace.drafts.has_row(t):
                rows.append(None)
                confs.append(None)
                lengths.append(0)
                continue
            length = int(np.argmax(tokens == PAD)) if np.any(tokens == PAD) else len(tokens)
            rows.append(tokens[:length].tolist())
            confs.append([round(float(c), 6) for c in conf[:length]])
            lengths.append(length)
        doc["drafts"] = {"k_max": trace.drafts.k_max, "tokens": rows, "conf": confs}
        if trace.drafts.lookup is not None:
            doc["drafts"]["lookup"] = to_dict(trace.drafts.lookup)
        cross = trace.drafts.cross
        if cross is not None:
            doc["drafts"] |= {"step": [row[:n].tolist() for row, n in zip(cross.step, lengths, strict=False)],
                              "drafter_tokens": [row.tolist() for row in cross.drafter_tokens],
                              "context": {"keep": cross.context_keep.tolist(),
                                          "append": [row.tolist() for row in cross.context_append]}}
    if trace.producer is not None:
        p = trace.producer
        doc["producer"] = {"tokens": p.tokens.tolist(), "conf": [round(float(c), 6) for c in p.conf],
                           "step": p.step.tolist(), "steps": p.steps, "stop": p.stop}
    if trace.recycle:
        doc["recycle"] = {label: [{"t": t, "tail": list(tail), "top1": list(a.top1), "conf": list(a.conf),
                                   "kept": a.kept, "cont": list(a.cont), "cont_conf": list(a.cont_conf)}
                                  for (t, tail), a in table.items()]
                          for label, table in trace.recycle.items()}
    if trace.text:
        doc["text"] = trace.text
    return doc


def header_dict(target: ModelRef, drafter: ModelRef, templates: Mapping[str, str] | None = None,
                environment: Environment | None = None, key: TraceKey | None = None,
                shard: Shard | None = None) -> dict:
    doc = {"kind": KIND, "schema_version": VERSION, "target": to_dict(target), "drafter": to_dict(drafter)}
    if templates is not None:
        doc["templates"] = {"target": templates["target"], "drafter": templates["drafter"]}
    if key is not None:
        doc["key"] = to_dict(key)
    if shard is not None:
        doc["shard"] = to_dict(shard)
    if environment is not None:
        doc[ENV_KEY] = environment_to_dict(environment)
    return doc


def load_trace_file(path: Path) -> TraceFile:
    path = Path(path)
    rows = iter_jsonl(path)
    first = next(rows, None)
    if first is None:
        raise SpecbenchError(f"{path}: empty file; expected a specbench.trace header line")
    where = Where(path, "line 1")
    check_header(first[1], KIND, VERSIONS, where)
    reject_unknown(first[1], _HEADER_KEYS, where)
    target, drafter = _model_ref(first[1], "target", where), _model_ref(first[1], "drafter", where)
    templates = _templates(first[1], where)
    environment = manifest_environment(first[1], where)
    key, shard = _key(first[1], where), _shard(first[1], where)
    vocab = Vocab.of(target, drafter)
    windows: dict[str, WindowTrace] = {}
    lines: dict[str, int] = {}
    for number, doc in rows:
        trace = window_trace_from_dict(doc, Where(path, f"line {number}"), vocab)
        if trace.window_id in lines:
            raise SpecbenchError(f"{path}:{number}: window_id = '{trace.window_id}', expected a window not yet in "
                                 f"the file (line {lines[trace.window_id]} holds it)",
                                 hint="keep one line per window")
        lines[trace.window_id] = number
        windows[trace.window_id] = trace
    return TraceFile(target, drafter, windows, path, templates, environment, key, shard)


def save_trace_file(path: Path, target: ModelRef, drafter: ModelRef, traces: Iterable[WindowTrace],
                    templates: Mapping[str, str] | None = None, key: TraceKey | None = None) -> None:
    lines = ([dumps_line(header_dict(target, drafter, templates, key=key))]
             + [dumps_line(window_trace_to_dict(t)) for t in traces])
    write_atomic(Path(path), "".join(lines))


def load_trace_dir(directory: Path) -> dict[str, TraceFile]:
    """All trace files of a directory, by drafter name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise SpecbenchError(f"{directory}: expected a traces directory (made by `specbench trace`)")
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise SpecbenchError(f"{directory}: no *.jsonl trace files")
    by_drafter: dict[str, TraceFile] = {}
    for path in files:
        trace_file = load_trace_file(path)
        name = trace_file.drafter.name
        if name in by_drafter:
            raise SpecbenchError(f"{path}: drafter '{name}' already traced in {by_drafter[name].path}")
        targets = {f.target for f in by_drafter.values()}
        if targets and trace_file.target not in targets:
            other = next(iter(targets))
            raise SpecbenchError(f"{path}: target {trace_file.target.name} ({trace_file.target.sha256[:12]}) differs "
                                 f"from {other.name} ({other.sha256[:12]}) in the other trace files")
        _check_target_template(trace_file, by_drafter.values())
        by_drafter[name] = trace_file
    return by_drafter


def _check_target_template(trace_file: TraceFile, others: Iterable[TraceFile]) -> None:
    """One target prompted two ways decides differently: its trace files must agree."""
    if trace_file.templates is None:
        return
    for other in others:
        if other.templates is not None and other.templates["target"] != trace_file.templates["target"]:
            raise SpecbenchError(f"{trace_file.path}: the target was traced with chat template "
                                 f"'{trace_file.templates['target']}', {other.path} with "
                                 f"'{other.templates['target']}'",
                                 hint="trace every drafter with the same target template")


def check_against_windows(trace_files: Mapping[str, TraceFile], windows: Sequence[Window]) -> None:
    """Every window must be traced, for the same content (sha256) and within its cap."""
    for name, trace_file in trace_files.items():
        for window in windows:
            trace = trace_file.windows.get(window.window_id)
            if trace is None:
                raise SpecbenchError(f"{trace_file.path}: no trace for window '{window.window_id}' (drafter {name})",
                                     hint="run `specbench trace` on this windows file")
            if trace.window_sha256 != window.window_sha256:
                raise SpecbenchError(
                    f"{trace_file.path}: window '{window.window_id}': window_sha256 {trace.window_sha256} differs "
                    f"from the windows file's {window.window_sha256}",
                    hint="the window changed since it was traced; trace it again")
            if trace.n_tokens > window.cap:
                raise SpecbenchError(f"{trace_file.path}: window '{window.window_id}': y has {trace.n_tokens} tokens, "
                                     f"more than the cap {window.cap}")


class TraceWriter:
    """One trace file written a window at a time, for specbench's recorder and any other decoder.

    The header (both models' identities and vocabulary sizes, and the chat templates when given) is written when
    the file is created. Each window line is validated by the loader itself before it is
    appended and flushed, so an interrupted decoder keeps every window it finished; with
    `resume=True` an existing file of the same models and templates is continued (a line an
    interruption cut short is dropped) and the windows it holds are listed in `done`.
    Example (docs/METHODS.md §3 Traces)::

        writer = TraceWriter("traces/mydrafter.jsonl", target=ModelRef("big", sha_big, n_vocab=49152),
                             drafter=ModelRef("mydrafter", sha_small, n_vocab=49152))
        writer.write_window(window_id="w1", window_sha256=window.window_sha256, y=[5, 9, 2],
                            stop_reason="eos", n_prompt=31,
                            drafts={"k_max": 4, "tokens": [[5, 9], None, [2]], "conf": [[0.9, 0.8], None, [0.7]]})
    """

    def __init__(self, path: Path | str, target: ModelRef, drafter: ModelRef,
                 templates: Mapping[str, str] | None = None, resume: bool = False,
                 environment: Environment | None = None, key: TraceKey | None = None, shard: Shard | None = None):
        self.path = Path(path)
        self.vocab = Vocab.of(target, drafter)
        """The vocabulary sizes every window written is checked against."""
        self.environment = environment
        """The header's environment: this session's, or the file's continued by it on resume."""
        self.done: dict[str, str] = {}
        """window_id -> window_sha256 of the windows already in the file."""
        if templates is not None:
            templates = _templates({"templates": dict(templates)}, Where(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = WriterLock(self.path, "trace file")  # held until `finish` (or the process ends)
        try:
            self._open(target, drafter, templates, resume, environment, key, shard)
        except BaseException:
            self._lock.release()
            raise

    def _open(self, target: ModelRef, drafter: ModelRef, templates: dict[str, str] | None, resume: bool,
              environment: Environment | None, key: TraceKey | None, shard: Shard | None) -> None:
        if self.path.exists() and self.path.stat().st_size > 0:
            if not resume:
                raise SpecbenchError(f"{self.path}: trace file already exists",
                                     hint="pass --resume to continue it, or choose another --out")
            drop_cut_line(self.path)  # a window cut short by an interruption is written again
            existing = load_trace_file(self.path)
            for role, old, new in (("target", existing.target, target), ("drafter", existing.drafter, drafter)):
                if (old.sha256, old.n_vocab) != (new.sha256, new.n_vocab):
                    raise SpecbenchError(f"{self.path}: cannot resume: the {role} model differs "
                                         f"({old.name} {old.sha256[:12]} in the file, "
                                         f"{new.name} {new.sha256[:12]} now)",
                                         hint="trace into another --out directory")
            if existing.templates != templates:
                raise SpecbenchError(f"{self.path}: cannot resume: the chat templates differ "
                                     f"({_templates_text(existing.templates)} in the file, "
                                     f"{_templates_text(templates)} now)", hint="trace into another --out directory")
            # the windows may grow or shrink on resume (each one already traced is checked by `todo`)
            if (_runner_settings(existing.key), existing.shard) != (_runner_settings(key), shard):
                raise SpecbenchError(f"{self.path}: cannot resume: traced with other settings "
                                     f"({_settings_change(existing, key, shard)})",
                                     hint="trace into another --out directory")
            self.done = {w.window_id: w.window_sha256 for w in existing.windows.values()}
            self._models = (target, drafter, existing.templates, key, shard)
            if environment is not None:
                self.environment = continued(existing.environment, environment)
                self._write_header()
            elif existing.key != key:  # the header names this run's windows, the file's session kept
                self.environment = existing.environment
                self._write_header()
        else:
            self._models = (target, drafter, templates, key, shard)
            header = header_dict(target, drafter, templates, self.environment, key, shard)
            _model_ref(header, "target", Where(self.path, "line 1"))  # names and sha256 must be strings
            _model_ref(header, "drafter", Where(self.path, "line 1"))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_jsonl(self.path, [header])

    def _write_header(self) -> None:
        """Replace the header line (the windows after it are kept byte for byte)."""
        rest = self.path.read_bytes().partition(b"\n")[2]
        target, drafter, templates, key, shard = self._models
        header = header_dict(target, drafter, templates, self.environment, key, shard)
        write_atomic(self.path, dumps_line(header) + rest.decode("utf-8"))

    def finish(self, at: str, models: Sequence[LoadedModel] = ()) -> None:
        """Record the end of this session (and the models as the runner loaded them) in the header."""
        if self.environment is not None:
            self.environment = self.environment.finish(at, models)
            self._write_header()
        self._lock.release()

    def todo(self, windows: Sequence[Window]) -> list[Window]:
        """The windows not yet in the file; one written with other content is an error."""
        for window in windows:
            sha = self.done.get(window.window_id)
            if sha is not None and sha != window.window_sha256:
                raise SpecbenchError(f"{self.path}: window '{window.window_id}' was traced with different content "
                                     f"(window_sha256 {sha[:12]}, now {window.window_sha256[:12]})",
                                     hint="trace the changed windows into another --out directory")
        return [w for w in windows if w.window_id not in self.done]

    def write_window(self, **fields: object) -> WindowTrace:
        """Validate one window line (the keys of a trace line: `$defs/window` of docs/schemas/trace.schema.json;
        lists may be numpy arrays) and append it; returns the window as the loader reads it."""
        doc = {key: _plain(value) for key, value in fields.items()}
        where = Where(f"{self.path}: window '{doc.get('window_id', '?')}'")
        trace = window_trace_from_dict(doc, where, self.vocab)
        self._append_new(trace.window_id, window_trace_to_dict(trace))
        return trace

    def write(self, trace: WindowTrace) -> None:
        """Append a window that is already a `WindowTrace`; a window id the file holds is refused."""
        doc = window_trace_to_dict(trace)
        window_trace_from_dict(doc, Where(f"{self.path}: window '{trace.window_id}'"), self.vocab)
        self._append_new(trace.window_id, doc)

    def _append_new(self, window_id: str, doc: dict) -> None:
        if window_id in self.done:
            raise SpecbenchError(f"{self.path}: window '{window_id}' is already in the file")
        self.append(doc)

    def append(self, doc: dict) -> None:
        """Append a line made by `window_trace_to_dict` (already validated)."""
        append_jsonl(self.path, [doc])
        self.done[doc["window_id"]] = doc["window_sha256"]


def _plain(value: object) -> object:
    """numpy arrays and scalars as the lists and numbers JSON holds."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _templates_text(templates: Mapping[str, str] | None) -> str:
    if templates is None:
        return "none recorded"
    return ", ".join(f"{role} {name}" for role, name in templates.items())


def _runner_settings(key: TraceKey | None) -> tuple | None:
    """The key without its windows: what a resumed file must share with this run."""
    return None if key is None else (key.runner_sha256, key.k_max, key.specasr)


def _settings_change(existing: TraceFile, key: TraceKey | None, shard: Shard | None) -> str:
    """What differs between a trace file's key and shard and those of this run."""
    if existing.key is not None and key is not None and _runner_settings(existing.key) != _runner_settings(key):
        kept = (d for d in existing.key.differences(key) if not d.startswith(("windows_sha256", "n_windows")))
        return "; ".join(kept) + " (the file's vs this run's)"
    if existing.key != key:
        return f"{'no key' if existing.key is None else 'a key'} in the file, {'none' if key is None else 'one'} now"
    before, after = (("none" if s is None else s.label) for s in (existing.shard, shard))
    return f"shard {before} in the file, {after} now"
