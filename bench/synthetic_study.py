"""A synthetic study the size of the AS2D paper, for benchmarking replay only.

Nothing here is a measurement: token streams, drafter behaviour and device costs are
drawn from simple seeded rules so that the replay code sees realistic shapes and sizes.

* Windows: `n_windows` text windows, output lengths log-normal around `mean_tokens`
  (cap 400; longer outputs are cut by the cap, as in real studies).
* Target output y: random token ids in [3, VOCAB), ending with EOS = 2 unless capped.
* Drafter (prefix-conditioned drafts and recycling answers): a deterministic function of
  (window, context length, last context token). When the last context token agrees with
  y at that position the drafter predicts y's next token with the window's quality q
  (drafter "small": ~0.62, "large": ~0.78), otherwise with 0.3; confidences are higher
  for correct predictions. Because it is one function, drafts, recycling answers and
  continuations are mutually consistent, as a real model's would be.
* Producer stream z: y with substitutions, insertions and deletions at drafter-dependent
  rates; the "large" drafter has a different vocabulary, so its mapped tokens arrive
  0-2 per producer step (vocabulary mapping shifts).
* Devices: four profiles with widths 1..16 at depths 0/256/512, a non-smooth per-position
  cost curve, and co-scheduling ratios measured only up to width 8 (wider ones are
  extrapolated, which exercises the sensitivity path).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specbench.core.methods.base import TargetOracle
from specbench.core.methods.configs import SpecAsrConfig
from specbench.core.methods.specasr import decode_specasr, kept_tail
from specbench.core.pricing import CoSchedule, CostTable
from specbench.schemas.profiles import DeviceInfo, DeviceProfile, DrafterProfile, ModelId, Overheads, RunnerRecord
from specbench.schemas.traces import PAD, DraftTable, ModelRef, ProducerStream, RecycleAnswer, TraceFile, WindowTrace
from specbench.schemas.windows import Window, make_text_window

EOS = 2
VOCAB = 4000
CAP = 400
MASK = (1 << 64) - 1
DRAFTERS = {"small": dict(quality=0.62, sub=0.15, ins=0.03, dele=0.03, mapped=False),
            "large": dict(quality=0.78, sub=0.08, ins=0.02, dele=0.02, mapped=True)}


def _mix_int(*values: int) -> int:
    """splitmix64 over a tuple of integers (pure Python, bit-identical to `_mix_array`)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & MASK)) & MASK
        h = (h + 0x9E3779B97F4A7C15) & MASK
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & MASK
        h ^= h >> 31
    return h


def _mix_array(*values: np.ndarray) -> np.ndarray:
    h = np.full(np.broadcast(*values).shape, 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for v in values:
            h ^= np.asarray(v).astype(np.int64).astype(np.uint64)
            h += np.uint64(0x9E3779B97F4A7C15)
            h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h


def _unit(h):
    return (h >> 11) / float(1 << 53) if isinstance(h, int) else (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass(frozen=True)
class _Drafter:
    """The synthetic drafter of one window: (context length, last token) -> (token, confidence)."""

    seed: int
    y: np.ndarray
    quality: float

    def predict(self, length: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.y)
        h1, h2, h3 = (_mix_array(self.seed, length, last, salt) for salt in (1, 2, 3))
        u, u2 = _unit(h1), _unit(h2)
        on_track = (length >= 1) & (last == self.y[np.clip(length - 1, 0, n - 1)]) & (length <= n)
        following = np.where(length < n, self.y[np.clip(length, 0, n - 1)], EOS)
        correct = u < np.where(on_track, self.quality, 0.3)
        wrong = 3 + (h3 % np.uint64(VOCAB - 3)).astype(np.int64)
        wrong = np.where(wrong == following, 3 + (wrong - 2) % (VOCAB - 3), wrong)
        token = np.where(correct, following, wrong)
        conf = np.where(correct, 0.55 + 0.45 * u2, 0.1 + 0.6 * u2)
        return token, conf

    def next_token(self, context: tuple[int, ...]) -> tuple[int, float]:
        """`predict` for one context, in plain Python (same bits, much faster per call)."""
        length, last = len(context), (context[-1] if context else -1)
        n = len(self.y)
        u, u2 = (_unit(_mix_int(self.seed, length, last, salt)) for salt in (1, 2))
        h3 = _mix_int(self.seed, length, last, 3)
        on_track = 1 <= length <= n and last == int(self.y[length - 1])
        following = int(self.y[length]) if length < n else EOS
        if u < (self.quality if on_track else 0.3):
            return following, 0.55 + 0.45 * u2
        wrong = 3 + h3 % (VOCAB - 3)
        if wrong == following:
            wrong = 3 + (wrong - 2) % (VOCAB - 3)
        return wrong, 0.1 + 0.6 * u2

    def draft_table(self, k_max: int) -> DraftTable:
        """Row t: greedy continuation after y[:t], all rows advanced together."""
        n = len(self.y)
        tokens = np.full((n, k_max), PAD, dtype=np.int32)
        conf = np.zeros((n, k_max))
        t = np.arange(n)
        last = np.where(t >= 1, self.y[np.clip(t - 1, 0, n - 1)], -1)
        alive = np.ones(n, dtype=bool)
        for i in range(k_max):
            token, prob = self.predict(t + i, last)
            tokens[alive, i] = token[alive]
            conf[alive, i] = prob[alive]
            alive &= token != EOS
            last = token
        return DraftTable(tokens, conf)


class _TableDrafts:
    """The synthetic drafter's answers to a decision procedure (methods.base.DraftSource), for
    building traces: prefix-conditioned continuations from the precomputed table, recycling
    queries from the drafter function, each answer recorded per configuration as a trace holds
    them. It sees `y` because it stands where the real models stand when a trace is recorded;
    decision procedures still see only what the oracle commits."""

    def __init__(self, y, drafter: _Drafter, table: DraftTable):
        self._y = tuple(int(v) for v in y)
        self._next = drafter.next_token
        self._table = table
        self.recorded: dict[str, dict[tuple[int, tuple[int, ...]], RecycleAnswer]] = {}

    def continuation(self, t: int):
        return self._table.tokens[t], self._table.conf[t]

    def _greedy(self, context: tuple[int, ...], length: int) -> tuple[np.ndarray, np.ndarray]:
        tokens = np.full(length, PAD, dtype=np.int32)
        conf = np.zeros(length)
        for i in range(length):
            token, prob = self._next(context)
            tokens[i], conf[i] = token, prob
            if token == EOS:
                break
            context += (token,)
        return tokens, conf

    def recycle(self, config: SpecAsrConfig, t: int, tail: tuple[int, ...], limit: int) -> RecycleAnswer:
        context = self._y[:t]
        predictions = [self._next(context + tail[:i]) for i in range(len(tail) + 1)]
        top1 = tuple(p[0] for p in predictions)
        conf = tuple(p[1] for p in predictions)
        kept = kept_tail(tail, top1, conf, config.tau, limit)
        cont, cont_conf = self._greedy(context + tail[:kept], self._table.k_max)
        length = int(np.sum(cont != PAD))
        answer = RecycleAnswer(top1, conf, kept, tuple(cont[:length].tolist()), tuple(cont_conf[:length].tolist()))
        self.recorded.setdefault(config.trace_label, {})[(t, tail)] = answer
        return answer


def _producer(rng: np.random.Generator, y: np.ndarray, capped: bool, spec: dict) -> ProducerStream:
    tokens, conf = [], []
    for token in y.tolist():
        roll = rng.random()
        if roll < spec["dele"]:
            continue
        if roll < spec["dele"] + spec["ins"]:
            tokens.append(int(rng.integers(3, VOCAB)))
            conf.append(float(rng.uniform(0.2, 0.7)))
        if roll > 1 - spec["sub"] and token != EOS:
            tokens.append(int(rng.integers(3, VOCAB)))
            conf.append(float(rng.uniform(0.1, 0.8)))
        else:
            tokens.append(token)
            conf.append(float(rng.uniform(0.6, 1.0)))
    tokens, conf = tokens[:CAP], conf[:CAP]
    m = len(tokens)
    if spec["mapped"]:  # 0-2 target tokens per producer step
        per_step = rng.choice([0, 1, 1, 1, 2], size=m + 8)
        step = np.repeat(np.arange(len(per_step)), per_step)[:m]
        if len(step) < m:
            step = np.concatenate([step, np.arange(len(per_step), len(per_step) + m - len(step))])
    else:
        step = np.arange(m)
    steps = int(step[-1]) + 1 if m else 0
    return ProducerStream(np.asarray(tokens, dtype=np.int32), np.asarray(conf), step.astype(np.int32), steps,
                          "cap" if capped or (tokens and tokens[-1] != EOS) else "eos")


def _cost_table(rng: np.random.Generator, base: float, per_token: float, label: str) -> CostTable:
    depths = np.array([0.0, 256.0, 512.0])
    widths = np.arange(1, 17)
    # Non-smooth per-position costs: bumps where kernels change tiles.
    bumps = 1.0 + 0.12 * (widths % 4 == 1) * (widths > 1) + rng.uniform(-0.03, 0.03, size=len(widths))
    seconds = {int(w): base * (1 + per_token * (w - 1)) * b * (1 + depths / 4096) for w, b in zip(widths, bumps)}
    return CostTable(depths, seconds, label)


def synthetic_profiles(n_devices: int = 4, seed: int = 0) -> list[DeviceProfile]:
    rng = np.random.default_rng(seed + 1000)
    profiles = []
    for i in range(n_devices):
        name = f"synthetic-{chr(ord('A') + i)}"
        target = _cost_table(rng, rng.uniform(0.02, 0.06), rng.uniform(0.08, 0.3), f"synthetic profile {name} target")
        drafters = {}
        for d_name, scale in (("small", 0.35), ("large", 0.55)):
            costs = _cost_table(rng, target.seconds[1][0] * scale * rng.uniform(0.8, 1.2), 0.2, f"{name} {d_name}")
            measured = range(1, 9)
            cosched = CoSchedule(np.array([0.0]), {w: np.array([rng.uniform(1.05, 1.3)]) for w in measured},
                                 {w: np.array([rng.uniform(1.1, 1.5)]) for w in measured})
            drafters[d_name] = DrafterProfile(d_name, ModelId(d_name, f"synthetic-{d_name}"), "cpu",
                                              costs, cosched)
        profiles.append(DeviceProfile(DeviceInfo(name, {"kind": "synthetic"}), ModelId("target", "synthetic-target"),
                                      "gpu", target, drafters,
                                      Overheads(producer_startup_s=0.02, publish_s=0.0005, align_s=0.0002),
                                      recorded_runner=RunnerRecord("synthetic")))
    return profiles


@dataclass(frozen=True)
class Study:
    windows: list[Window]
    traces: dict[str, TraceFile]
    profiles: list[DeviceProfile]


def synthetic_study(n_windows: int = 688, mean_tokens: float = 142.0, n_devices: int = 4, seed: int = 0,
                    k_max: int = 16, specasr: tuple[SpecAsrConfig, ...] = (SpecAsrConfig(),),
                    dev_fraction: float = 0.25) -> Study:
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.normal(np.log(mean_tokens) - 0.18, 0.6, size=n_windows)).round().astype(int) + 1
    windows, ys, capped = [], [], []
    for i, n in enumerate(lengths):
        cut = n >= CAP
        n = min(max(int(n), 2), CAP)
        y = rng.integers(3, VOCAB, size=n).astype(np.int32)
        if not cut:
            y[-1] = EOS
        split = "dev" if rng.random() < dev_fraction else "test"
        # "chatml" keeps the window hashes of the frozen golden rows (tests/data/golden); nothing is rendered.
        windows.append(make_text_window(f"syn-{i:04d}", f"synthetic source {i}", "Transcribe.", CAP, "synthetic", split,
                                        template="chatml"))
        ys.append(y)
        capped.append(cut)
    traces = {}
    target = ModelRef("synthetic-target", "synthetic-target", VOCAB)
    for d_index, (name, spec) in enumerate(DRAFTERS.items()):
        window_traces = {}
        for i, (window, y) in enumerate(zip(windows, ys)):
            quality = float(np.clip(spec["quality"] + rng.normal(0, 0.08), 0.05, 0.97))
            drafter = _Drafter(seed * 1_000_003 + d_index * 7919 + i, y, quality)
            table = drafter.draft_table(k_max)
            recycle = {}
            for config in specasr:
                live = _TableDrafts(y, drafter, table)
                decode_specasr(TargetOracle(y), live, window.cap, 0, 0, config)
                recycle.update(live.recorded)
            window_traces[window.window_id] = WindowTrace(
                window.window_id, window.window_sha256, y, "cap" if capped[i] else "eos", 0, 0, table,
                _producer(rng, y, capped[i], spec), recycle)
        traces[name] = TraceFile(target, ModelRef(name, f"synthetic-{name}", VOCAB), window_traces)
    return Study(windows, traces, synthetic_profiles(n_devices, seed))
