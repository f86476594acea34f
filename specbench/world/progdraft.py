"""ProgDraft round logs as specbench traces (docs/METHODS.md §3.1 Imported round logs): `specbench import-trace
progdraft`.

ProgDraft (github.com/yuanyuanjia71-spec/ProgDraft) exports one utterance per JSON file
(`demo/export_replay.py`; an example is its `site/assets/demo-trace.json`). The fields read
here, named as the export names them:

    k                                   candidates per round (K)
    reference.tokens, reference.text    the target-only greedy output and its text
    reference.emitted                   len(reference.tokens), when present
    reference.audio_duration_s          the utterance's length (also audio.duration)
    methods.<name>.rounds[i].round      1, 2, ... in order
    methods.<name>.rounds[i].candidates the K tokens the drafter proposed at that round's prefix
    methods.<name>.rounds[i].accepted   how many of them the target accepted
    methods.<name>.rounds[i].emitted    the tokens the round committed (accepted + correction/bonus)
    provenance.sample_id, provenance.target, provenance.audio_sha256, provenance.weights_sha256.<name>

Everything else (timings, `positions`, `pieces`, the audio envelope) is ignored: a trace holds
decisions, not times. Each method becomes one trace file whose drafter is named after it.

A round at prefix t (t tokens emitted before it) proposes candidates for y[t:], accepts the
longest prefix that agrees with the reference and emits one more token (the correction, or
the bonus after all K), so the next round starts at t + len(emitted): the recurrence of SD
at W = K + 1. specbench's prefill commits y[0], ProgDraft's first round verifies it (docs/METHODS.md §9 Choices named,
"ProgDraft's first round"): when that round accepted a >= 1 candidates, y[0] was the first
of them and the trace's row 1 holds the other K - 1 (replay's first round accepts a - 1 of
them and commits the same tokens); when it accepted none, its only token is y[0] and
replay starts at the export's second round. Rows the export never visited are absent
(null), so replay that needs one fails naming it; the export records no confidences, so the
rows carry 1.0 (replay them with p_min = 0; SpecASR's tau has nothing to read).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench.core.methods.base import Model, TargetOracle, TraceDrafts, lcp
from specbench.core.methods.configs import SdConfig
from specbench.core.methods.sd import decode_sd
from specbench.errors import SpecbenchError
from specbench.schemas.fileio import Where, load_json, need
from specbench.schemas.traces import PAD, DraftTable, ModelRef, WindowTrace, save_trace_file
from specbench.schemas.windows import MODEL_TEMPLATE, InputView, Split, Window, save_windows

DATASET = "progdraft"


@dataclass(frozen=True)
class Imported:
    """One utterance of a ProgDraft export: its window and a trace per method."""

    window: Window
    target: ModelRef
    drafters: dict[str, ModelRef]
    traces: dict[str, WindowTrace]
    """method name -> the utterance's trace for that drafter."""
    k: int


def window_sha256(audio_sha256: str, cap: int) -> str:
    """An imported utterance's identity: the audio file's sha256 (as ProgDraft recorded it) and the cap."""
    payload = json.dumps({"progdraft_audio_sha256": audio_sha256, "instruction": "", "template": MODEL_TEMPLATE,
                          "cap": cap}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _tokens(value: object, where: Where, n_vocab: int, length: int | None = None) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise where.fail("a list of token ids (integers)", value)
    for i, token in enumerate(value):
        if not 0 <= token < n_vocab:
            raise where.at(i).out_of_range(token, f"a token id in [0, {n_vocab}) (target vocabulary, --n-vocab)")
    if length is not None and len(value) != length:
        raise where.fail(f"{length} tokens", f"{len(value)} tokens")
    return value


def _rows(rounds: list, y: list[int], k: int, n_vocab: int, where: Where) -> tuple[dict[int, list[int]], list]:
    """(prefix t -> the K candidates proposed there, [(accepted, emitted count, round number)]),
    each round checked against the reference output."""
    rows: dict[int, list[int]] = {}
    expected = []
    t = 0
    for i, doc in enumerate(rounds):
        r_where = where.at(i)
        number = need(doc, "round", int, r_where)
        if number != i + 1:
            raise r_where.at("round").fail(f"{i + 1} (rounds in order)", number)
        if t >= len(y):
            raise r_where.fail(f"no round after the reference's {len(y)} tokens are emitted", f"round {number}")
        candidates = _tokens(need(doc, "candidates", list, r_where), r_where.at("candidates"), n_vocab, k)
        accepted = need(doc, "accepted", int, r_where)
        agree = lcp(candidates, y[t:])
        if accepted != agree:
            raise r_where.at("accepted").fail(f"{agree} (the candidates' agreement with reference.tokens[{t}:])",
                                              accepted)
        emitted = _tokens(need(doc, "emitted", list, r_where), r_where.at("emitted"), n_vocab)
        if emitted != y[t:t + len(emitted)] or len(emitted) != min(accepted + 1, len(y) - t):
            raise r_where.at("emitted").fail(f"reference.tokens[{t}:{t + min(accepted + 1, len(y) - t)}] "
                                             f"(the accepted candidates and one more token)", emitted)
        rows[t] = candidates
        expected.append((accepted, len(emitted), number))
        t += len(emitted)
    if t != len(y):
        raise where.fail(f"rounds that emit all {len(y)} reference tokens", f"{t} tokens emitted")
    return rows, expected


def _trace(window: Window, y: list[int], text: str, rows: dict[int, list[int]], k: int, n_prompt: int) -> WindowTrace:
    n = len(y)
    tokens = np.full((n, k), PAD, dtype=np.int32)
    recorded = np.zeros(n, dtype=bool)
    first = rows[0]
    # docs/METHODS.md §9 Choices named: the prefill commits y[0], the rest is row 1
    if first[0] == y[0] and 1 < n and 1 not in rows:
        rows = {**rows, 1: first[1:]}
    for t, candidates in rows.items():
        tokens[t, :len(candidates)] = candidates
        recorded[t] = True
    conf = np.where(tokens != PAD, 1.0, 0.0)
    return WindowTrace(window.window_id, window.window_sha256, np.asarray(y, dtype=np.int32), _stop(n, window.cap),
                       n_prompt, n_prompt, DraftTable(tokens, conf, None, None if recorded.all() else recorded),
                       text=text)


def _stop(n: int, cap: int) -> str:
    return "cap" if n >= cap else "eos"


def _check_replay(trace: WindowTrace, name: str, k: int, cap: int, expected: list, where: Where) -> None:
    """SD at W = K + 1 over the imported rows must accept and commit what each round did."""
    ops = decode_sd(TargetOracle(trace.y), TraceDrafts(trace, name), cap, trace.n_prompt, trace.n_prompt_drafter,
                    SdConfig(width=k + 1, drafter=name)).ops
    replayed = [(op.accepted, op.committed) for op in ops if op.model is Model.TARGET]
    accepted_0, emitted_0, _ = expected[0]
    if accepted_0 >= 1:  # the prefill committed y[0]: the first round's rest commits the remainder
        expected = [(accepted_0 - 1, emitted_0 - 1, 1)] + expected[1:]
        if emitted_0 == 1:  # everything the first round emitted was y[0] (a one-token output)
            expected = expected[1:]
    else:
        expected = expected[1:]
    for i, (got, (accepted, emitted, number)) in enumerate(zip(replayed, expected, strict=False)):
        if got != (accepted, emitted):
            raise where.at(number - 1).fail(f"replay at K={k} to accept {accepted} and commit {emitted} tokens "
                                            f"as this round did (replay round {i + 1})",
                                            f"accepted {got[0]}, committed {got[1]}")
    if len(replayed) != len(expected):
        raise where.fail(f"{len(expected)} rounds after the prefill, as replay at K={k} gives", len(replayed))


def read_export(path: Path, cap: int, n_prompt: int, target_sha256: str | None = None, *, n_vocab: int) -> Imported:
    """One ProgDraft export file, checked field by field (token ids against the target's `n_vocab`,
    which the export does not record); errors name the file, the utterance and the key."""
    path = Path(path)
    doc = load_json(path)
    where = Where(path)
    if not isinstance(doc, dict):
        raise where.fail("a ProgDraft export object (demo/export_replay.py)", type(doc).__name__)
    provenance = need(doc, "provenance", dict, where)
    utterance = need(provenance, "sample_id", str, where.at("provenance"))
    where = Where(f"{path}: utterance '{utterance}'")
    p_where = where.at("provenance")
    version = doc.get("schema_version")
    if version != 1:
        raise where.at("schema_version").fail("1 (the ProgDraft export version this importer reads)", version)
    k = need(doc, "k", int, where)
    if k < 1:
        raise where.at("k").fail("an integer >= 1 (candidates per round)", k)
    reference = need(doc, "reference", dict, where)
    y = _tokens(need(reference, "tokens", list, where.at("reference")), where.at("reference").at("tokens"), n_vocab)
    if not y:
        raise where.at("reference").at("tokens").fail("at least one token", y)
    if len(y) > cap:
        raise where.at("reference").at("tokens").fail(f"at most --cap {cap} tokens", f"{len(y)} tokens")
    emitted = need(reference, "emitted", int, where.at("reference"), len(y))
    if emitted != len(y):
        raise where.at("reference").at("emitted").fail(f"{len(y)} (the length of reference.tokens)", emitted)
    text = need(reference, "text", str, where.at("reference"), "")
    duration = need(reference, "audio_duration_s", float, where.at("reference"), None)
    audio_sha = need(provenance, "audio_sha256", str, p_where)
    window = Window(utterance, window_sha256(audio_sha, cap),
                    InputView("audio", audio_path=utterance, duration_s=None if duration is None else float(duration)),
                    "", MODEL_TEMPLATE, cap, DATASET, Split.TEST, text or None)
    target_name = need(provenance, "target", str, p_where)
    weights = need(provenance, "weights_sha256", dict, p_where, {})
    methods = need(doc, "methods", dict, where)
    if not methods:
        raise where.at("methods").fail("at least one method")
    traces, drafters = {}, {}
    for name, method in methods.items():
        m_where = where.at("methods").at(str(name))
        rounds = need(method, "rounds", list, m_where)
        if not rounds:
            raise m_where.at("rounds").fail("at least one round")
        rows, expected = _rows(rounds, y, k, n_vocab, m_where.at("rounds"))
        trace = _trace(window, y, text, rows, k, n_prompt)
        _check_replay(trace, name, k, cap, expected, m_where.at("rounds"))
        traces[name] = trace
        sha = weights.get(name)
        # the candidates are target tokens: the drafter is named with the target's vocabulary
        drafters[name] = ModelRef(name, sha if isinstance(sha, str) and sha else f"progdraft:{name}", n_vocab)
    return Imported(window, ModelRef(target_name, target_sha256 or f"progdraft:{target_name}", n_vocab), drafters,
                    traces, k)


def import_progdraft(paths: Sequence[Path], out_dir: Path, windows_path: Path, cap: int, n_prompt: int,
                     target_sha256: str | None = None, *, n_vocab: int) -> tuple[list[Path], int]:
    """Read every export, check them all, then write `out_dir/<method>.jsonl` and the windows
    file (nothing is written when any input is refused). Returns (trace paths, utterances)."""
    for flag, value in (("--cap", cap), ("--n-prompt", n_prompt), ("--n-vocab", n_vocab)):
        if value < 1:
            raise SpecbenchError(f"{flag} {value}: expected an integer >= 1")
    imported = [read_export(p, cap, n_prompt, target_sha256, n_vocab=n_vocab) for p in paths]
    if not imported:
        raise SpecbenchError("import-trace progdraft: no export files given")
    first = imported[0]
    seen: dict[str, Path] = {}
    for path, item in zip(paths, imported, strict=False):
        if item.window.window_id in seen:
            raise SpecbenchError(f"{path}: utterance '{item.window.window_id}' "
                                 f"is also in {seen[item.window.window_id]}")
        seen[item.window.window_id] = path
        if item.target != first.target:
            raise SpecbenchError(f"{path}: provenance.target '{item.target.name}' differs from "
                                 f"'{first.target.name}' in {paths[0]}")
        if set(item.traces) != set(first.traces):
            raise SpecbenchError(f"{path}: methods {sorted(item.traces)} differ from {sorted(first.traces)} in "
                                 f"{paths[0]}", hint="import exports of the same methods together")
        for name, ref in item.drafters.items():
            if ref != first.drafters[name]:
                raise SpecbenchError(f"{path}: provenance.weights_sha256.{name} {ref.sha256[:12]} differs from "
                                     f"{first.drafters[name].sha256[:12]} in {paths[0]}")
    out_dir = Path(out_dir)
    outputs = [out_dir / f"{name}.jsonl" for name in first.traces]
    for output in [*outputs, Path(windows_path)]:
        if output.exists():
            raise SpecbenchError(f"{output}: already exists", hint="choose another --out / --windows")
    for name, output in zip(first.traces, outputs, strict=False):
        save_trace_file(output, first.target, first.drafters[name], [item.traces[name] for item in imported])
    save_windows(Path(windows_path), [item.window for item in imported])
    return outputs, len(imported)
