"""Why a method pays or does not on one device@placement, in the profile's own costs
(docs/METHODS.md §7.10 The one-screen summary). Pure: a profile and a run's counts in, a sentence out.

The arithmetic prices one target forward of the run, its single-token steps and its verifications
each at their own cost, the way replay prices its forwards (§5.1 Serial pricing, §5.2 The two-lane
AS2D simulation), with the same cost functions (`CostTable.cost`, `CoSchedule.ratios`) at one stated
KV depth. A share s of the run's target forwards verified no candidate (single-token steps, CT(1));
the others verified, at w, the measured width nearest their mean 1 + proposed / verifications:

* serial (sd, specasr): per target forward, its drafter forwards at CD(1) and the target's
  forward, over the tokens one forward commits (τ):
  (f × CD(1) + s × CT(1) + (1 − s) × CT(w)) / τ seconds a token;
* as2d: the target never waits for the producer, so a token costs the target lane's forwards
  slowed by their co-scheduling ratios, over τ: (s × ρT(1) × CT(1) + (1 − s) × ρT(w) × CT(w)) / τ;
  the producer's lane, ρD × CD(1) a drafter forward (ρD beside single steps and beside verifications,
  weighted by the target lane's time in each) plus its host work a step, says whether it kept ahead;

against target-only's CT(1) a token. f, s, w and τ are the run's own: f = drafter forwards /
target forwards, τ = tokens / target forwards, summed over the configuration's windows. Both
classes are priced apart because a forward's cost is far from linear in its width (CT(2) is
well above CT(1), CT(4) little above CT(2)): an AS2D run of mostly single steps and a few wide
verifications, priced as one forward of its mean width, read 0.96x beside a replayed 1.22x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.core.replay.reference import solo_host_work
from specbench.schemas.profiles import DeviceProfile

MS = 1e3
VERDICT_TOLERANCE = 0.10
"""How far (relative) a verdict's speedup may be from the replayed one before the summary says they disagree:
the verdict prices each class of forward at its mean width and one depth, so a few percent apart is its
approximation, not an error."""


@dataclass(frozen=True)
class ForwardCounts:
    """What a configuration did over its windows on one device (sums of its rows)."""

    tokens: int
    """Tokens committed."""
    target_forwards: int
    """Target forwards (verifications and single steps): the rows' `target_forwards`."""
    drafter_forwards: int
    """Drafter forwards charged."""
    proposed: int
    """Candidates the target verified."""
    accepted: int = 0
    """Candidates the target accepted."""
    verifications: int | None = None
    """Target forwards that verified at least one candidate (the rows' `reached_at[0]`); the others were
    single-token steps. None: not recorded, every forward taken as a verification."""


@dataclass(frozen=True)
class Verdict:
    """One configuration's cost a token against target-only's, and the sentence that derives it."""

    method: str
    """sd, specasr or as2d."""
    depth: float
    """The KV depth every cost was read at."""
    width: int
    """The verifications' width priced (the measured width nearest their mean; 1 without verifications)."""
    tau: float
    """Tokens committed per target forward."""
    drafter_per_forward: float
    """Drafter forwards per target forward."""
    single_share: float
    """Share of the target forwards that were single-token steps (verified no candidate)."""
    ct_s: float
    """CT(width) at `depth`."""
    cd_s: float
    """The drafter's CD(1) at `depth`."""
    ct1_s: float
    """CT(1) at `depth`: target-only's seconds a token."""
    rho_target: float
    """AS2D: the target lane's co-scheduling ratio at `width` (1 for serial methods)."""
    rho_single: float
    """AS2D: the target lane's co-scheduling ratio at width 1, its single steps' (1 for serial methods)."""
    rho_drafter: float
    """AS2D: the producer's co-scheduling ratio beside the target's single steps and beside its verifications at
    `width`, weighted by the target lane's time in each (1 for serial methods)."""
    per_token_s: float
    """The configuration's seconds a token by this arithmetic."""
    coverage: float = 0.0
    """Accepted drafts per committed token: how much of the output the drafter supplied."""
    host_s: float = 0.0
    """AS2D: the producer's host work a step beside the target, as replay charges it (its measured
    `producer_step_s`; docs/METHODS.md §5.2 The two-lane AS2D simulation); 0 for serial methods."""

    @property
    def pays_pct(self) -> float:
        """How much faster than target-only, in percent (negative: slower)."""
        return 100.0 * (self.ct1_s / self.per_token_s - 1.0)

    @property
    def outcome(self) -> str:
        return f"pays {self.pays_pct:.0f}%" if self.pays_pct > 0 else f"does not pay: {-self.pays_pct:.0f}%"

    @property
    def text(self) -> str:
        """The arithmetic in one sentence, e.g. '4.0 drafter forwards (4.0 × 12.2 ms) + CT(5) 40.0 ms
        for τ = 4.50 tokens = 19.7 ms a token against CT(1) 20.9 ms: pays 6%'."""
        f, cd, per, ct1 = self.drafter_per_forward, self.cd_s * MS, self.per_token_s * MS, self.ct1_s * MS
        forward = self._target_forward()
        if self.method == "as2d":
            host = self.host_s * MS
            producer = self.rho_drafter * cd + host
            keeps = "keeps up" if producer <= per else "lags"
            shown = f" + host {host:.1f} ms" if host >= 0.05 else ""  # what rounds to 0.0 ms stays in the sum only
            return (f"{forward} for τ = {self.tau:.2f} tokens (coverage {100 * self.coverage:.0f}%) = "
                    f"{per:.1f} ms a token against CT(1) {ct1:.1f} ms: {self.outcome}; producer CD(1) {cd:.1f} ms × "
                    f"ρD {self.rho_drafter:.2f}{shown} = {producer:.1f} ms, {keeps}")
        return (f"{f:.1f} drafter forwards ({f:.1f} × {cd:.1f} ms) + {forward} for τ = "
                f"{self.tau:.2f} tokens = {per:.1f} ms a token against CT(1) {ct1:.1f} ms: {self.outcome}")

    def _target_forward(self) -> str:
        """The target forward's cost: 'CT(5) 40.0 ms' (× ρT for AS2D), or its two classes with their shares."""
        as2d = self.method == "as2d"

        def cost(width: int, ct_ms: float, rho: float) -> str:
            return f"CT({width}) {ct_ms:.1f} ms" + (f" × ρT {rho:.2f}" if as2d else "")

        verify = cost(self.width, self.ct_s * MS, self.rho_target)
        if self.single_share <= 0 or self.width == 1:  # one class: all verifications, or all single steps
            return verify
        single = cost(1, self.ct1_s * MS, self.rho_single)
        return f"{self.single_share:.2f} × {single} + {1 - self.single_share:.2f} × {verify}"


def disagreement(found: Verdict, speedup: float) -> str:
    """'' when the verdict's speedup (CT(1) over its cost a token) is within VERDICT_TOLERANCE of the
    configuration's replayed `speedup` and both say the same of whether it pays, else the clause that says
    they disagree and which one to read ("pays 3%" beside a replayed 0.98x would contradict the row's figure)."""
    implied = found.ct1_s / found.per_token_s
    if not math.isfinite(speedup) or speedup <= 0:
        return ""
    close = abs(math.log(implied / speedup)) <= math.log1p(VERDICT_TOLERANCE)
    if close and (implied > 1.0) == (speedup > 1.0):
        return ""
    return f"; replay says {speedup:.2f}x, this round {implied:.2f}x: read the speedup"


def stated_depth(profile: DeviceProfile) -> float:
    """The KV depth a verdict reads costs at: the middle of the profile's measured target depths."""
    depths = profile.target_costs.depths
    return float(depths[0] + depths[-1]) / 2.0


def verdict(profile: DeviceProfile, method: str, drafter: str | None, counts: ForwardCounts,
            depth: float) -> Verdict:
    """`method`'s verdict on `profile` from its `counts`, every cost at KV depth `depth`."""
    if counts.target_forwards <= 0 or counts.tokens <= 0:
        raise ValueError("a verdict needs a configuration that committed tokens")
    measured = profile.target_costs.widths()
    verifications = counts.target_forwards if counts.verifications is None else counts.verifications
    if not 0 <= verifications <= counts.target_forwards:
        raise ValueError(f"{verifications} verifications of {counts.target_forwards} target forwards")
    width = 1
    if verifications:
        mean_width = 1.0 + counts.proposed / verifications
        width = min(measured, key=lambda w: (abs(w - mean_width), w))
    single = 1.0 - verifications / counts.target_forwards
    ct = profile.target_costs.cost(width, depth)
    ct1 = profile.target_costs.cost(1, depth)
    cd = profile.drafter(drafter).costs.cost(1, depth)
    tau = counts.tokens / counts.target_forwards
    per_forward = counts.drafter_forwards / counts.target_forwards
    rho_t = rho_1 = rho_d = 1.0
    host = 0.0
    if method == "as2d":
        cosched = profile.cosched(drafter)
        ratios = cosched.ratios
        rho_t, rho_d_verify, _ = ratios(width, depth)
        rho_1, rho_d_single, _ = ratios(1, depth)
        singles, verifies = single * rho_1 * ct1, (1.0 - single) * rho_t * ct
        per_token = (singles + verifies) / tau
        # the producer runs beside both classes: its ratio beside each, weighted by the target lane's time in it
        rho_d = (singles * rho_d_single + verifies * rho_d_verify) / (singles + verifies)
        # a step's host work, in solo seconds as the timeline holds it, stretched as the producer's forward is
        host = rho_d * solo_host_work(cosched) * (profile.overheads_of(drafter).producer_step_s or 0.0)
    else:
        per_token = (per_forward * cd + single * ct1 + (1.0 - single) * ct) / tau
    return Verdict(method, depth, width, tau, per_forward, single, ct, cd, ct1, rho_t, rho_1, rho_d, per_token,
                   counts.accepted / counts.tokens, host)
