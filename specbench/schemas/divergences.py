"""divergences.jsonl of a native results directory: one `Divergence` per (window, configuration) whose
output differed from the reference, with where, which forward committed it, and its explanation
(docs/METHODS.md §6.5 Divergences explained; core/divergence.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from specbench.schemas.fileio import Where, from_dict, iter_jsonl, to_dict

DIVERGENCES = "divergences.jsonl"


class Explanation(str, Enum):
    """The class of a divergence (core/divergence.py's near-tie rule decides it)."""

    NEAR_TIE = "near-tie"
    """The width-1 gap between the expected and the committed token is within 2δ."""
    UNEXPLAINED = "unexplained"
    """Anything else: the run fails."""


@dataclass(frozen=True)
class Margins:
    """What the runner's `divergence` mode measured at the differing position."""

    single_top2: tuple[int, int]
    """The two highest-ranked tokens of the width-1 row (how the reference decided)."""
    single_margin: float
    """Their logit difference (top-1 minus top-2) at width 1."""
    batched_top2: tuple[int, int]
    """The two highest-ranked tokens of the decode's forward at its row."""
    batched_margin: float
    """Their logit difference in that row."""
    single_gap: float
    """Width-1 logit of the expected token minus that of the committed one."""
    batched_gap: float
    """The same in the decode's row (negative when it ranked the committed token higher)."""
    max_logit_diff: float
    """δ: the largest |logit difference| between the two rows over the vocabulary."""

    @classmethod
    def from_runner(cls, result: dict) -> Margins:
        """From the runner's `divergence_margins` record."""
        single, batched = result["single"], result["batched"]
        return cls(tuple(int(t) for t, _ in single["top"]), float(single["margin"]),  # type: ignore[arg-type]
                   tuple(int(t) for t, _ in batched["top"]), float(batched["margin"]),  # type: ignore[arg-type]
                   float(single["expected_logit"]) - float(single["got_logit"]),
                   float(batched["expected_logit"]) - float(batched["got_logit"]), float(result["max_logit_diff"]))


@dataclass(frozen=True)
class Divergence:
    """One (window, configuration) output that differed from the reference."""

    window_id: str
    config: str
    position: int
    """First differing position of the output (0-based, y[0] the prefill's token)."""
    expected: int | None
    """The reference's token there (None: the output is longer than the reference)."""
    got: int | None
    """The output's token there (None: the output ended first)."""
    sample: int = 0
    """The first timed decode (0-based, of --runs) whose output differed."""
    device: str = ""
    forwards: tuple[tuple[int, int], ...] = ()
    """[width, accepted] of that decode's target forwards, in order (() = not reported)."""
    width: int | None = None
    """Width of the target forward that committed the position (None: not found)."""
    row: int | None = None
    """Its row that decided the position (0 = the root's)."""
    margins: Margins | None = None
    """What the runner measured there (None: not measured)."""
    explanation: Explanation | None = None
    """near-tie or unexplained (core/divergence.py); None: not explained yet."""

    def as_dict(self) -> dict:
        return to_dict(self)


def load_explanations(directory: Path) -> dict[tuple[str, str, str], str]:
    """(device, window_id, config) -> explanation of each divergence recorded in `directory`'s divergences.jsonl
    ('' for a record without one; no file: none)."""
    path = Path(directory) / DIVERGENCES
    if not path.exists():
        return {}
    found = {}
    for line, doc in iter_jsonl(path):
        d: Divergence = from_dict(Divergence, doc, Where(f"{path}:{line}"))
        found[(d.device, d.window_id, d.config)] = "" if d.explanation is None else d.explanation.value
    return found
