"""The one-screen summary of a report (docs/METHODS.md §7.10 The one-screen summary): per
device@placement, each method's best configuration, its speedups and interval, replay's
fidelity where native rows exist, and the verdict's arithmetic in the profile's own costs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from specbench.app.report.inputs import LoadedResults, missing_profiles, profile_paths
from specbench.app.report.rows import MainRows, per_device, width_or_budget
from specbench.core import metrics
from specbench.core.pricing import CostFit
from specbench.core.verdict import MS, ForwardCounts, disagreement, stated_depth, verdict
from specbench.errors import SpecbenchError
from specbench.render.summary import Summary, SummaryLine, SummarySection
from specbench.render.tables import Table
from specbench.schemas.placement import device_of

TITLE = "Summary: each method's best configuration per device@placement"
ORDER = ("per device@placement x method x drafter: the configuration of highest pooled speedup (the SD mean over "
         "W left out); speedup and its interval as in the pooled table; vs_best_target = against the fastest "
         "target-only of the device in any placement; fidelity_pct = mean over windows of |replay - native| / "
         "native throughput, where native rows exist; verdict: the run's mean target forward priced with the "
         "profile's costs at KV depth `depth` (docs/METHODS.md §7.10 The one-screen summary): "
         "serial (f x CD(1) + s x CT(1) + (1 - s) x CT(w)) / tau, "
         "as2d (s x rhoT(1) x CT(1) + (1 - s) x rhoT(w) x CT(w)) / tau, against CT(1); s the share of target "
         "forwards that verified no candidate, w the verifications' mean width, f and tau the run's own means")
CATEGORY_ORDER = ("; pays_in, loses_in, unclear_in: the windows' categories where the configuration's pooled "
                  "speedup interval (the per-category table's) lies above 1, below 1, or spans 1 (or has none)")
COLUMNS = ("speedup", "95% interval", "vs best", "fidelity")
COLUMN_FORMATS = {"tokens_per_s": ".2f", "speedup": ".3f", "speedup_low": ".3f", "speedup_high": ".3f",
                  "speedup_vs_best_target": ".3f", "fidelity_pct": ".1f", "depth": ".0f", "ms_per_token": ".2f",
                  "pays_pct": ".1f"}


def build_summary(loaded: LoadedResults, rows: MainRows, pooled: pd.DataFrame,
                  categories: pd.DataFrame | None = None) -> tuple[Summary, Table]:
    """The summary of `rows.main` for a terminal, and the same as a table for every other format
    (`pooled`: metrics.pooled of them, as the pooled table has it; `categories`: metrics.per_category
    of them, when their windows have categories)."""
    from specbench.schemas.profiles import load_profile

    counts = metrics.counts(rows.main).set_index(["device", "config"])
    fidelity = (metrics.replay_fidelity(rows.frame).set_index(["device", "config"])["mean_abs_error_pct"]
                if len(rows.native) and len(rows.replayed) else pd.Series(dtype=float))
    paths, missing = profile_paths(loaded), missing_profiles(loaded)
    records, sections, notes, depths = [], [], [], {}
    fastest = _fastest_targets(pooled)
    for device, mine in pooled.groupby("device", sort=False):
        profile = load_profile(paths[device]) if device in paths and rows.suffix == "" else None
        depth = stated_depth(profile) if profile is not None else math.nan
        target = mine[mine["method"] == "target"].iloc[0]
        heading = f"{device}: target-only {target['tokens_per_s']:.2f} tokens/s"
        if "speedup_vs_best_target" in mine and fastest.get(device, device) != device:
            heading += f" ({target['speedup_vs_best_target']:.3f}x {fastest[device]}'s)"
        if profile is not None:
            heading += f", CT(1) {profile.target_costs.cost(1, depth) * MS:.1f} ms"
            depths[device] = depth
        else:
            heading += "; " + _no_verdict(device, rows, missing)
        baseline = profile.target_costs.cost(1, depth) * MS if profile is not None else math.nan
        records.append(_record(target, fidelity, depth, baseline, math.nan, "the baseline"))
        lines = []
        for _, best in best_configs(mine).iterrows():
            found = None
            if profile is not None:
                found, reason = _verdict(profile, best, counts.loc[(device, best["config"])], depth)
            text = (found.text + disagreement(found, float(best["speedup"])) if found is not None
                    else (reason if profile is not None else ""))
            records.append(_record(best, fidelity, depth, found.per_token_s * MS if found else math.nan,
                                   found.pays_pct if found else math.nan, text or _no_verdict(device, rows, missing)))
            by_category = _by_category(categories, device, best["config"]) if categories is not None else {}
            if by_category:
                records[-1].update({f"{k}_in": ", ".join(v) for k, v in by_category.items()})
            lines.append(SummaryLine(_name(best), _cells(best, fidelity), text, _category_text(by_category)))
        sections.append(SummarySection(heading, tuple(lines)))
    if depths:
        at = (f"{next(iter(depths.values())):g}" if len(set(depths.values())) == 1 else
              ", ".join(f"{d:g} ({device})" for device, d in depths.items()))
        notes.append(f"verdicts: the profile's costs at KV depth {at}, the middle of its measured depths; "
                     "fidelity: mean |replay - native| / native")
        notes.append("how to read it: docs/METHODS.md §7.10 The one-screen summary")
    notes += _transcript_notes(loaded, rows)
    frame = pd.DataFrame(records)
    if "speedup_vs_best_target" not in pooled:  # one placement per device: the column says nothing
        frame = frame.drop(columns=["speedup_vs_best_target"])
    return (Summary(TITLE + rows.suffix, COLUMNS, tuple(sections), tuple(notes)),
            Table(TITLE + rows.suffix, ORDER + (CATEGORY_ORDER if categories is not None else ""), frame,
                  COLUMN_FORMATS))


def _transcript_notes(loaded: LoadedResults, rows: MainRows) -> list[str]:
    """Where rows carry transcripts: target-only's WER against the references per device (pooled over
    windows), and whether every configuration's transcript equals the others' on each window."""
    from specbench.core import text_metrics

    if not text_metrics.has_text(rows.frame):
        return []
    scored = rows.main if text_metrics.has_text(rows.main) else rows.native
    scores = text_metrics.transcripts(scored[scored["method"] == "target"], loaded.references)
    notes = []
    if len(scores):
        # pooled over datasets: word edits (wer_pct of ref_words) over reference words
        edits = (scores["wer_pct"].fillna(0.0) * scores["ref_words"] / 100.0).groupby(scores["device"], sort=False)
        words = scores.groupby("device", sort=False)["ref_words"].sum()
        wer = ", ".join(f"{100 * e / words[device]:.1f}% ({device})" for device, e in edits.sum().items()
                        if words[device] > 0)
        if wer:
            notes.append(f"transcripts: target-only's WER against the references {wer}")
    checks = text_metrics.text_check_by_device(rows.frame[rows.frame["cost_fit"] == CostFit.MEDIAN])
    if checks:
        identical = per_device([(device, checked - differing, checked) for device, checked, differing in checks])
        differ = any(differing for _, _, differing in checks)
        notes.append(f"lossless in text: every configuration's transcript is target-only's on {identical}"
                     + ("; the others differ, see --detail" if differ else ""))
    return notes


def _by_category(categories: pd.DataFrame, device: str, config: str) -> dict[str, list[str]]:
    """{'pays': [...], 'loses': [...], 'unclear': [...]}: the categories where the configuration's
    speedup interval lies above 1, below 1, or spans 1 (or has none: one window), each with its speedup."""
    mine = categories[(categories["device"] == device) & (categories["config"] == config)
                      & (categories["category"] != metrics.OVERALL)]
    out: dict[str, list[str]] = {"pays": [], "loses": [], "unclear": []}
    for row in mine.itertuples(index=False):
        kind = ("pays" if row.speedup_low > 1 else "loses" if row.speedup_high < 1 else "unclear") \
            if not (pd.isna(row.speedup_low) or pd.isna(row.speedup_high)) else "unclear"
        out[kind].append(f"{row.category} {row.speedup:.2f}")
    return out if len(mine) else {}


def _category_text(by_category: dict[str, list[str]]) -> str:
    """'by category: pays in coding 1.42; loses in writing 0.91; unclear in math 1.02 (interval spans 1)'."""
    if not by_category:
        return ""
    parts = [f"{kind} in {', '.join(names)}" for kind, names in by_category.items() if names]
    if by_category["unclear"]:
        parts[-1] += " (interval spans 1, or one window)"
    return "by category: " + "; ".join(parts)


def _fastest_targets(pooled: pd.DataFrame) -> dict[str, str]:
    """device@placement -> the device@placement of the same device with the fastest target-only."""
    if "speedup_vs_best_target" not in pooled:
        return {}
    targets = pooled[pooled["method"] == "target"]
    phones = targets["device"].map(device_of)
    best = targets.groupby(phones)["tokens_per_s"].idxmax()
    return {d: targets.loc[best[p], "device"] for d, p in zip(targets["device"], phones, strict=False)}


def best_configs(mine: pd.DataFrame) -> pd.DataFrame:
    """Per method x drafter, the configuration of highest speedup (SD's mean over W is no configuration)."""
    candidates = mine[(mine["method"] != "target") & ~((mine["method"] == "sd") & mine["width"].isna())]
    key = candidates["drafter"].fillna("")
    best = candidates.groupby([candidates["method"], key], sort=False)["speedup"].idxmax()
    return candidates.loc[list(best)]


def _verdict(profile, best: pd.Series, counts: pd.Series, depth: float):
    """(the verdict, None), or (None, why there is none)."""
    drafter = None if pd.isna(best["drafter"]) else best["drafter"]
    try:
        verifications = None if pd.isna(counts["verifications"]) else int(counts["verifications"])
        found = verdict(profile, best["method"], drafter,
                        ForwardCounts(int(counts["tokens"]), int(counts["target_forwards"]),
                                    int(counts["drafter_forwards"]), int(counts["proposed"]),
                                    int(counts["accepted"]), verifications), depth)
    except (SpecbenchError, ValueError) as exc:
        return None, f"no verdict: {exc}"
    return found, None


def _no_verdict(device: str, rows: MainRows, missing: dict[str | None, str]) -> str:
    if rows.suffix:
        return "no verdict: native rows only (the verdict prices a replay run's rows)"
    if device in missing:
        return f"no verdict: profile {missing[device]} not found"
    return "no verdict: the results name no profile"


def _record(row: pd.Series, fidelity: pd.Series, depth: float, ms_per_token: float, pays_pct: float,
            text: str) -> dict:
    return {"device": row["device"], "config": row["config"], "method": row["method"], "drafter": row["drafter"],
            "W/B": width_or_budget(row["method"], row["width"], row["budget"]),
            "tokens_per_s": row["tokens_per_s"], "speedup": row["speedup"],
            "speedup_low": row.get("speedup_low", math.nan), "speedup_high": row.get("speedup_high", math.nan),
            "speedup_vs_best_target": row.get("speedup_vs_best_target", math.nan),
            "fidelity_pct": fidelity.get((row["device"], row["config"]), math.nan), "depth": depth,
            "ms_per_token": ms_per_token, "pays_pct": pays_pct, "verdict": text}


def _name(row: pd.Series) -> str:
    """e.g. 'sd W=5 smollm2', 'as2d B=3', 'specasr smollm2'."""
    parts = [row["method"]]
    size = width_or_budget(row["method"], row["width"], row["budget"])
    if size is not None:
        parts.append(("W=" if row["method"] == "sd" else "B=") + size)
    if not pd.isna(row["drafter"]):
        parts.append(str(row["drafter"]))
    return " ".join(parts)


def _cells(row: pd.Series, fidelity: pd.Series) -> tuple[str, ...]:
    def number(value, spec: str, suffix: str = "") -> str:
        return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else format(value, spec) + suffix

    low, high = row.get("speedup_low", math.nan), row.get("speedup_high", math.nan)
    interval = "-" if pd.isna(low) or pd.isna(high) else f"{low:.3f}-{high:.3f}"
    return (number(row["speedup"], ".3f"), interval, number(row.get("speedup_vs_best_target", math.nan), ".3f"),
            number(fidelity.get((row["device"], row["config"]), math.nan), ".1f", "%"))

