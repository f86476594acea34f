"""Text answers: WER/CER against the reference, and lossless in text. Pure: DataFrames in, DataFrames out.

* **Normalisation** (`NORMALISATION`, applied to references and answers alike before
  scoring): drop a leading Qwen3-ASR `language X<asr_text>` prefix; lower-case (Unicode
  casefold); delete apostrophes (don't -> dont); every other punctuation character
  (Unicode category P*) becomes a space; whitespace runs collapse to one space, trimmed.
  Symbols and digits are kept as they are (no number spelling).
* **WER / CER** come from jiwer on the normalised strings: word edits (S + D + I) over
  reference words; CER the same over characters, the single spaces included.
* **Pooled** (corpus level) per dataset x device x configuration = sum of edits / sum of
  reference words (characters) over the scored windows; **mean** = the unweighted mean of
  the per-window rates. A window whose reference is empty after normalisation has no
  rate: it is counted (`empty_reference`) and left out of both.
* **Lossless in text**: per dataset x device x window, the raw answer text of every
  configuration must equal target-only's (or, with no target-only row, the first row's).
  A row with empty text is "not recorded" and is not compared.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import jiwer
import numpy as np
import pandas as pd

NORMALISATION = "specbench-text-1"
NORMALISATION_STEPS = ("strip a leading 'language X<asr_text>' (Qwen3-ASR), casefold, delete apostrophes, other "
                       "punctuation -> space, collapse whitespace")
_ASR_PREFIX = re.compile(r"^\s*language\s+[^<\n]*<asr_text>", re.IGNORECASE)
_APOSTROPHES = "'\u2019\u02bc"


class _PunctuationTable(dict):
    """str.translate table: apostrophes deleted, other punctuation to a space; filled as characters are seen."""

    def __missing__(self, code: int) -> int | str | None:
        value = " " if unicodedata.category(chr(code)).startswith("P") else code
        self[code] = value
        return value


_PUNCTUATION = _PunctuationTable({ord(c): None for c in _APOSTROPHES})

ORDER = {
    "transcripts": f"per dataset x device x configuration, text normalised ({NORMALISATION}: {NORMALISATION_STEPS}); "
                   "pooled wer = sum(S + D + I) / sum(reference words) over scored windows, wer_mean = mean of "
                   "per-window WER; cer the same over characters; windows with an empty reference are counted "
                   "(empty_reference) and excluded; rows without text or without a reference are counted (unscored)",
    "lossless_text": "per dataset x device x window: each configuration's raw answer text vs target-only's (or the "
                     "first row's without a target-only row); rows with empty text are not recorded and not compared",
    "text_differs": "one row per configuration whose raw text differs from the compared one on that window; "
                    "first_diff_char = 0-based index of the first differing character",
}


def normalise(text: str) -> str:
    """`text` as it is scored (see `NORMALISATION_STEPS`)."""
    text = _ASR_PREFIX.sub("", text, count=1)
    return " ".join(text.casefold().translate(_PUNCTUATION).split())


@dataclass(frozen=True)
class Edits:
    """Edit counts of one answer against one reference, after normalisation."""

    word_edits: int
    """Substitutions + deletions + insertions, in words."""
    ref_words: int
    char_edits: int
    ref_chars: int

    @property
    def wer(self) -> float:
        return self.word_edits / self.ref_words if self.ref_words else float("nan")

    @property
    def cer(self) -> float:
        return self.char_edits / self.ref_chars if self.ref_chars else float("nan")


def edits(reference: str, hypothesis: str) -> Edits:
    """Word and character edits of `hypothesis` against `reference` (normalised first).

    An empty (normalised) reference gives zero reference words: its rate is undefined (NaN)."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return Edits(len(hyp.split()), 0, len(hyp), 0)
    words = jiwer.process_words(ref, hyp)
    chars = jiwer.process_characters(ref, hyp)
    return Edits(words.substitutions + words.deletions + words.insertions, len(ref.split()),
                 chars.substitutions + chars.deletions + chars.insertions, len(ref))


def has_text(frame: pd.DataFrame) -> bool:
    return "text" in frame and bool((frame["text"] != "").any())


def transcripts(frame: pd.DataFrame, references: Mapping[str, tuple[str, str | None]]) -> pd.DataFrame:
    """WER/CER per dataset x device x configuration (see the module docstring for the orders).

    `references`: window_id -> (window_sha256, reference or None). A row is scored when it
    has text and its window (same id and sha256) has a reference."""
    rows = frame[frame["text"] != ""]
    # methods share their text: score each distinct (window, sha256, text) once, then index back
    codes = rows.groupby(["window_id", "window_sha256", "text"], sort=False).ngroup().to_numpy()
    distinct = rows.iloc[np.unique(codes, return_index=True)[1]]
    scores: list[Edits | None] = []
    for window_id, sha, text in zip(distinct["window_id"], distinct["window_sha256"], distinct["text"], strict=False):
        known_sha, reference = references.get(window_id, ("", None))
        scores.append(edits(reference, text) if known_sha == sha and reference is not None else None)
    scored = np.array([e is not None for e in scores])[codes]
    if not scored.any():
        return pd.DataFrame()
    kept = [e or Edits(0, 0, 0, 0) for e in scores]
    per_code = {name: np.array([getattr(e, name) for e in kept])[codes][scored]
                for name in ("word_edits", "ref_words", "char_edits", "ref_chars", "wer", "cer")}
    rows = rows.loc[scored, ["dataset", "device", "config"]].assign(**per_code)
    rows["empty"] = rows["ref_words"] == 0
    rows.loc[rows["empty"], ["word_edits", "char_edits"]] = 0  # no rate: out of the pooled sums too
    totals = frame.groupby(["dataset", "device", "config"], sort=False).size().rename("rows")
    table = rows.groupby(["dataset", "device", "config"], sort=False).agg(
        windows=("empty", lambda s: int((~s).sum())), empty_reference=("empty", "sum"),
        word_edits=("word_edits", "sum"), ref_words=("ref_words", "sum"), char_edits=("char_edits", "sum"),
        ref_chars=("ref_chars", "sum"), wer_mean=("wer", "mean"), cer_mean=("cer", "mean")).reset_index()
    table["unscored"] = (table.join(totals, on=["dataset", "device", "config"])["rows"]
                        - table["windows"] - table["empty_reference"]).astype(int)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["wer_pct"] = 100.0 * table["word_edits"] / table["ref_words"].where(table["ref_words"] > 0)
        table["cer_pct"] = 100.0 * table["char_edits"] / table["ref_chars"].where(table["ref_chars"] > 0)
    table["wer_mean_pct"] = 100.0 * table["wer_mean"]
    table["cer_mean_pct"] = 100.0 * table["cer_mean"]
    table["empty_reference"] = table["empty_reference"].astype(int)
    return table[["dataset", "device", "config", "windows", "empty_reference", "unscored", "ref_words", "wer_pct",
                  "wer_mean_pct", "cer_pct", "cer_mean_pct"]]


def first_difference(a: str, b: str) -> int:
    """Index of the first character where `a` and `b` differ (the shorter length when one is a prefix)."""
    limit = min(len(a), len(b))
    return next((i for i in range(limit) if a[i] != b[i]), limit)


def _excerpt(text: str, at: int, width: int = 12) -> str:
    before, after = ("..." if at > width else ""), ("..." if at + width < len(text) else "")
    return before + text[max(0, at - width):at + width] + after


def _checked_windows(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, device, window) with text in at least two rows: its rows with text (`size`) and their
    distinct texts (`nunique`)."""
    sizes = frame[frame["text"] != ""].groupby(["dataset", "device", "window_id"], sort=False)["text"].agg(
        ["size", "nunique"])
    return sizes[sizes["size"] >= 2]


def text_check_by_device(frame: pd.DataFrame) -> list[tuple[str, int, int]]:
    """Lossless in text per device, in device order: (device, windows checked, windows whose texts differ), as
    `text_check` counts them; devices with no window checked are left out."""
    checked = _checked_windows(frame)
    differs = (checked["nunique"] > 1).groupby(level="device").agg(["size", "sum"])
    return [(str(device), int(row["size"]), int(row["sum"])) for device, row in differs.sort_index().iterrows()]


def text_check(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Lossless in text: (a one-row summary, the differing rows).

    Summary columns: windows_checked (windows with text in at least two rows), identical,
    differing, rows_compared, rows_without_text."""
    with_text = frame[frame["text"] != ""]
    keys = ["dataset", "device", "window_id"]
    checked = _checked_windows(frame)
    differing = checked[checked["nunique"] > 1]
    summary = pd.DataFrame([{"windows_checked": len(checked), "identical": len(checked) - len(differing),
                             "differing": len(differing), "rows_compared": int(checked["size"].sum()),
                             "rows_without_text": int((frame["text"] == "").sum())}])
    out = []
    if len(differing):
        suspects = with_text.set_index(keys).loc[differing.index].reset_index()
        for (dataset, device, window_id), group in suspects.groupby(keys, sort=False):
            target = group[group["method"] == "target"]
            against = (target if len(target) else group).iloc[0]
            for row in group.itertuples(index=False):
                if row.text == against["text"]:
                    continue
                at = first_difference(against["text"], row.text)
                out.append({"dataset": dataset, "device": device, "window_id": window_id, "config": row.config,
                            "source": row.source, "against": f"{against['config']} ({against['source']})",
                            "first_diff_char": at, "expected": _excerpt(against["text"], at),
                            "got": _excerpt(row.text, at)})
    columns = ["dataset", "device", "window_id", "config", "source", "against", "first_diff_char", "expected", "got"]
    return summary, pd.DataFrame(out, columns=columns)
