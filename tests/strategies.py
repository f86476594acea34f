"""Hypothesis strategies: random small traces and device profiles."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from bench.synthetic_study import EOS, _Drafter, _TableDrafts
from specbench.core.methods.base import TargetOracle
from specbench.core.methods.configs import As2dConfig, SdConfig, SpecAsrConfig, TargetConfig
from specbench.core.methods.specasr import decode_specasr
from specbench.core.pricing import AfterProducer, CoSchedule, CostTable, DecodeContention, DecodeRatio, HostWork
from specbench.schemas.profiles import DeviceInfo, DeviceProfile, DrafterProfile, ModelId, Overheads
from specbench.schemas.traces import ProducerStream, WindowTrace

SPECASR = SpecAsrConfig(k_max=4, tau=0.3)
MAX_WIDTH = 9
VOCAB = 6  # a tiny vocabulary makes accidental matches (and so every code path) common


@st.composite
def outputs(draw, max_tokens: int = 24):
    """(y, stop_reason, cap): the target's greedy output."""
    n = draw(st.integers(1, max_tokens))
    body = draw(st.lists(st.integers(3, 3 + VOCAB - 1), min_size=n, max_size=n))
    if draw(st.booleans()):
        return np.array(body[:-1] + [EOS], dtype=np.int32), "eos", n + draw(st.integers(0, 6))
    return np.array(body, dtype=np.int32), "cap", n


@st.composite
def producer_streams(draw, y: np.ndarray):
    """z: y with random substitutions, insertions and deletions; random mapping steps."""
    tokens, conf = [], []
    for token in y.tolist():
        edit = draw(st.sampled_from(["keep", "keep", "keep", "sub", "ins", "del"]))
        if edit == "del":
            continue
        if edit == "ins":
            tokens.append(draw(st.integers(3, 3 + VOCAB - 1)))
            conf.append(draw(st.floats(0.0, 1.0)))
        tokens.append(draw(st.integers(3, 3 + VOCAB - 1)) if edit == "sub" else token)
        conf.append(draw(st.floats(0.0, 1.0)))
    per_step = draw(st.lists(st.integers(0, 2), min_size=len(tokens) + 1, max_size=len(tokens) + 1))
    step = np.repeat(np.arange(len(per_step)), per_step)[: len(tokens)]
    if len(step) < len(tokens):
        step = np.concatenate([step, np.arange(len(per_step), len(per_step) + len(tokens) - len(step))])
    steps = (int(step[-1]) + 1 if len(step) else 0) + draw(st.integers(0, 2))
    return ProducerStream(np.array(tokens, dtype=np.int32), np.array(conf), step.astype(np.int32), steps,
                          draw(st.sampled_from(["eos", "cap"])))


@st.composite
def traces(draw):
    """(WindowTrace, cap) with drafts, a producer stream and SpecASR recycling answers."""
    y, stop, cap = draw(outputs())
    drafter = _Drafter(draw(st.integers(0, 2**31)), y, draw(st.floats(0.05, 0.95)))
    table = drafter.draft_table(8)
    live = _TableDrafts(y, drafter, table)
    decode_specasr(TargetOracle(y), live, cap, 0, 0, SPECASR)
    n_prompt = draw(st.integers(0, 40))
    trace = WindowTrace("w", "0" * 64, y, stop, n_prompt, draw(st.integers(0, 40)), table,
                        draw(producer_streams(y)), live.recorded)
    return trace, cap


def _costs(draw, label: str) -> CostTable:
    depths = np.array([0.0, float(draw(st.integers(1, 200)))])
    seconds = {}
    for width in range(1, MAX_WIDTH + 1):
        low = draw(st.floats(0.01, 1.0))
        seconds[width] = np.array([low, low * draw(st.floats(1.0, 2.0))])
    # a serial decode's ratio (pooled, with or without either class) scales every price, and the host work after
    # each forward (pooled, with or without either class) adds to it
    seconds_after = st.floats(0.0, 0.05)
    host = st.one_of(st.none(), st.builds(HostWork, seconds_after, st.just(40), st.one_of(st.none(), seconds_after),
                                          st.just(20), st.one_of(st.none(), seconds_after), st.just(20)))
    decode = draw(st.one_of(st.none(), st.builds(
        DecodeRatio, st.floats(0.5, 2.0), st.just(40), st.one_of(st.none(), st.floats(0.5, 2.0)), st.just(20),
        st.one_of(st.none(), st.floats(0.5, 2.0)), st.just(20), host=host)))
    return CostTable(depths, seconds, label, decode=decode)


@st.composite
def profiles(draw):
    measured = draw(st.lists(st.integers(1, MAX_WIDTH), min_size=1, max_size=MAX_WIDTH, unique=True))
    ratio = st.lists(st.floats(1.0, 3.0), min_size=2, max_size=2).map(np.array)
    # the ratios AS2D decodes met, where measured, price both lanes (and the producer's host work) in their stead
    met = st.floats(1.0, 3.0)
    # the target alone after the producer: some widths with enough forwards for their own ratio, some without
    after = st.one_of(st.none(), st.dictionaries(
        st.integers(1, MAX_WIDTH), st.tuples(st.floats(0.5, 2.0), st.just(1.0), st.sampled_from([1, 8, 30])),
        min_size=1).map(AfterProducer))
    decode = draw(st.one_of(st.none(), st.builds(DecodeContention, met, met, st.just(40), producer=st.one_of(
        st.none(), met), pace_sigma=st.one_of(st.none(), st.sampled_from([0.05, 0.3])), pace_pairs=st.just(10),
        after=after)))
    cosched = CoSchedule(np.array([0.0, 64.0]), {w: draw(ratio) for w in measured}, {w: draw(ratio) for w in measured},
                         decode=decode)
    overheads = Overheads(producer_startup_s=draw(st.sampled_from([0.0, 0.05, 1.0, 1e6])),
                          publish_s=draw(st.sampled_from([0.0, 0.01])), align_s=draw(st.sampled_from([0.0, 0.02])),
                          producer_step_s=draw(st.sampled_from([0.0, 0.003])))
    drafter = DrafterProfile("drafter", ModelId("d"), "cpu", _costs(draw, "random drafter"), cosched)
    return DeviceProfile(DeviceInfo("random"), ModelId("t"), "gpu", _costs(draw, "random target"),
                         {"drafter": drafter}, overheads)


_fractions = st.sampled_from([0.0, 0.2, 0.25, 0.5, 1.0])
_drafters = st.one_of(st.none(), st.sampled_from(["small", "gemma3", "smollm2"]))
method_configs = st.one_of(
    st.just(TargetConfig()),
    st.builds(SdConfig, width=st.integers(2, 16), p_min=_fractions, drafter=_drafters),
    st.builds(SpecAsrConfig, k_max=st.integers(1, 16), tau=_fractions, drafter=_drafters),
    st.builds(As2dConfig, budget=st.integers(1, 15), drafter=_drafters, batch=st.integers(1, 16), conf_stop=_fractions,
              align=st.sampled_from(["anchor", "positional"]), horizon=st.integers(1, 12)))
"""Every method's configuration over its parameters' ranges (labels, row fields, specs)."""
