"""A native decode's decisions against the ones replay takes on the trace (docs/METHODS.md §6.4
Drafters and decisions checked against the trace).

Greedy decisions are deterministic given the models: a serial method's native run must verify
exactly the candidates replay's procedure verifies on the trace, so its accepted and proposed
counts per verification are replay's, one by one. AS2D's candidates depend on when batches are
published, which is timing, but its producer reads only the window: its stream must be the
traced producer stream (a prefix of it when the producer was drained at the decode's end). A
decode run with another drafter file than the trace's, under the same name, fails this check
while its output, which the target alone decides, can still be lossless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.core.methods.base import Model
from specbench.core.methods.configs import As2dConfig, MethodConfig, SdConfig, SpecAsrConfig
from specbench.core.replay.reference import decode_serial
from specbench.schemas.traces import WindowTrace


@dataclass(frozen=True)
class NativeDecisions:
    """What a native decode decided, as the runner reported it."""

    verifications: tuple[tuple[int, int], ...]
    """(proposed, accepted) of every target forward, in order."""
    stream: tuple[int, ...] | None = None
    """AS2D: the producer's published stream in target tokens (None: a serial method)."""


def checked(config: MethodConfig) -> bool:
    """The configurations whose decisions a trace fixes: every one that drafts."""
    return isinstance(config, SdConfig | SpecAsrConfig | As2dConfig)


def decision_difference(config: MethodConfig, trace: WindowTrace, cap: int,
                        native: NativeDecisions) -> str | None:
    """None when `native` decided as replay does on `trace`; else the first difference, in words.
    Raises SpecbenchError when the trace cannot answer the procedure (a draft row or recycling
    query it lacks): the decisions cannot be checked then."""
    if isinstance(config, As2dConfig):
        if trace.producer is None:
            return None
        traced = [int(v) for v in trace.producer.tokens]
        got = list(native.stream or ())
        for i, (a, b) in enumerate(zip(traced, got, strict=False)):
            if a != b:
                return f"producer token {i} is {b}, the trace's is {a}"
        if len(got) > len(traced):
            return f"the producer published {len(got)} tokens, the trace's stream has {len(traced)}"
        return None
    name = getattr(config, "drafter", None) or "drafter"
    decoded = decode_serial(config, trace, cap, name)
    want = [(op.proposed, op.accepted) for op in decoded.ops if op.model is Model.TARGET]
    return first_verification_difference(want, list(native.verifications))


def first_verification_difference(want: Sequence[tuple[int, int]], got: Sequence[tuple[int, int]]) -> str | None:
    """The first verification whose (proposed, accepted) differ, in words (None: the same sequence)."""
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        if a != b:
            return (f"verification {i + 1} accepted {b[1]} of {b[0]}, the trace's {a[1]} of {a[0]} "
                    f"({sum(x[1] for x in got)} of {sum(x[0] for x in got)} accepted in all, the trace's "
                    f"{sum(x[1] for x in want)} of {sum(x[0] for x in want)})")
    if len(want) != len(got):
        return f"{len(got)} verifications, the trace's {len(want)}"
    return None
