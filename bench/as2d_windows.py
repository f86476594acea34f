"""Which windows carry AS2D's error, and what their native decodes did.

Reads a validation directory (`specbench validate --out`, or `bench/fidelity.py --out DIR`'s `DIR/validation`). Per
placement × AS2D configuration, each window's speedup error (100 × (ln replay − the mean of ln Na and ln Nb)) in every
kept block that ran it, beside what its native AS2D decodes did, summed over them: drafts accepted over drafts
verified (each target forward's `accepted` over its width less one), and of its target forwards how many verified
drafts (width above 1); and the drafts replay verified (the two-lane simulation, docs/METHODS.md §5.2 The two-lane
AS2D simulation, with each block's profile) against those native verified, each a mean per decode summed over the
blocks. Windows are printed by their mean error; then, over windows, the correlation of the error with the acceptance
and with the share of verifying forwards. An error that repeats in every block a window ran in is the window's own,
which E counts as the model's (docs/METHODS.md §7.9 Validation: does replay predict the device?). Last, whether the
Python verifier plans what the runner did when it is given, at each native target forward, the drafts the runner had
visible then (the op's `published`): a forward whose candidates or alignment start differ would be a decision the two
implementations take apart.

    python bench/as2d_windows.py DIR/validation
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.contention_by_width import kept_records, validation_inputs
from specbench.app.validate import block_profiles
from specbench.core.methods.as2d import As2dVerifier
from specbench.core.methods.base import TargetOracle
from specbench.core.methods.configs import As2dConfig
from specbench.core.replay.reference import producer_stream, simulate_as2d
from specbench.schemas.traces import WindowTrace
from specbench.schemas.validation import DecodeRecord, Metric, ObservationRecord, load_records


def target_forwards(decodes: list[DecodeRecord]) -> list[dict]:
    """The target's forwards of `decodes`, in order."""
    return [op for d in decodes for op in d.ops if op["model"] == "target"]


def verified_drafts(decodes: list[DecodeRecord]) -> int:
    """The drafts the target verified in `decodes` (its forwards' widths less one), summed."""
    return sum(int(op["width"]) - 1 for op in target_forwards(decodes))


def plans_as_native(decode: DecodeRecord, trace: WindowTrace, config: As2dConfig, cap: int) -> tuple[int, int]:
    """(forwards, those planned alike): the verifier replayed over a native AS2D decode's target forwards, each
    planned with the drafts the runner had published when it planned (`published`), against the runner's plan
    (the forward's width less one, and its alignment `start` where recorded)."""
    stream, oracle, verifier = producer_stream(trace), TargetOracle(trace.y), As2dVerifier(config, cap)
    forwards = alike = 0
    for op in target_forwards([decode]):
        plan = verifier.plan(oracle.committed, oracle.last(), stream.tokens, stream.conf, int(op["published"]))
        forwards += 1
        alike += len(plan.candidates) == int(op["width"]) - 1 and plan.start == op.get("start", plan.start)
        accepted, committed = oracle.verify(plan.candidates)
        verifier.observe(plan, accepted, committed)
        if oracle.done:
            break
    return forwards, alike


def main(argv: list[str] | None = None) -> int:
    validation, blocks, decodes = kept_records(__doc__, argv)
    inputs = validation_inputs(validation)
    configs = {c.label: c for c in inputs.configs if isinstance(c, As2dConfig)}
    profiles = block_profiles(validation, blocks)
    kept_blocks = {(b.device, b.block) for b in blocks}
    as2d = {d.config for d in decodes if d.producer is not None}
    errors: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in load_records(validation, ObservationRecord):
        if o.metric == Metric.SPEEDUP and o.config in as2d and (o.device, o.block) in kept_blocks:
            errors[(o.device, o.config)][o.window_id].append(
                100 * (math.log(o.replay) - (math.log(o.native_a) + math.log(o.native_b)) / 2))
    for (device, config), by_window in sorted(errors.items()):
        print(f"{device} {config}")
        as2d_config = configs[config]
        print(f"  {'window':16s} {'mean error':>10s}  {'per block':24s} {'accepted/verified':>17s} "
              f"{'verifying/forwards':>18s} {'verified: replay / native':>25s}")
        points = []
        for window in sorted(by_window, key=lambda w: statistics.fmean(by_window[w])):
            mine = [d for d in decodes if (d.device, d.config, d.window_id) == (device, config, window) and d.lossless]
            forwards = target_forwards(mine)
            verified = verified_drafts(mine)
            accepted = sum(int(op.get("accepted", 0)) for op in forwards)
            verifying = sum(1 for op in forwards if int(op["width"]) > 1)
            error = statistics.fmean(by_window[window])
            acceptance = accepted / verified if verified else math.nan
            share = verifying / len(forwards) if forwards else math.nan
            per_block = ", ".join(f"{e:+.1f}" for e in by_window[window])
            replayed = native = 0.0
            trace = inputs.traces[str(as2d_config.drafter)].windows[window]
            for block in sorted({d.block for d in mine}):
                _, counts = simulate_as2d(trace, inputs.windows[window].cap, profiles[(device, block)], as2d_config)
                replayed += counts["proposed"]
                in_block = [d for d in mine if d.block == block]
                native += verified_drafts(in_block) / len(in_block)
            print(f"  {window:16s} {error:+10.1f}  {per_block:24s} {acceptance:17.2f} {share:18.2f} "
                  f"{replayed:12.1f} / {native:10.1f}")
            if verified:
                points.append((error, acceptance, share))
        planned = [plans_as_native(d, inputs.traces[str(as2d_config.drafter)].windows[d.window_id], as2d_config,
                                   inputs.windows[d.window_id].cap)
                   for d in decodes if (d.device, d.config) == (device, config) and d.lossless]
        print(f"  the verifier given native's published drafts: {sum(a for _, a in planned)} of "
              f"{sum(f for f, _ in planned)} target forwards planned as the runner planned them")
        if len(points) > 2:
            e, a, s = zip(*points, strict=True)
            print(f"  over {len(points)} windows: correlation of the error with the acceptance "
                  f"{statistics.correlation(e, a):+.2f}, with the share of verifying forwards "
                  f"{statistics.correlation(e, s):+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
