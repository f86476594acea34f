"""A validation block's profile: the full profile's cost cells and co-scheduling ratios replaced by the mean of
the block's two refreshes (its decode ratios: and of its timings between passes), so that linear drift cancels
(docs/METHODS.md §7.9 Validation: does replay predict the device?). Pure: profile documents (as their YAML reads)
in and out."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.core.pricing import DECODE_CLASSES, PRODUCER_CLASSES, SERIAL_CLASSES
from specbench.core.stats import pooled_sd
from specbench.errors import SpecbenchError


def merged_profile(full: dict, refreshes: Sequence[dict], interims: Sequence[dict] = ()) -> dict:
    """The full profile with every refreshed cost cell and co-scheduling ratio replaced by the mean
    of the refreshes (a ratio cell's count: the refreshes' together, its achieved precision: the
    worse of theirs), and the refreshes' warnings beside the full profile's. `interims`: profiles of the
    decodes alone, timed again between the block's passes against one refresh's cells (each holding those cells
    and the drafters it decoded with): their decode ratios join the refreshes' in every mean of a price or of a
    ratio beside the producer, each an equal sample of the block's moments; the co-scheduling cells stay the
    refreshes'."""
    out = dict(full)
    samples = [*refreshes, *interims]

    def mean_table(table: dict, fresh: Sequence[dict]) -> dict:
        if any(f["depths"] != table["depths"] for f in fresh):
            raise SpecbenchError("a refresh measured other depths than the full profile")
        decoded = all("decode" in f for f in fresh)  # the model's serial decodes beside each refresh's cells
        out = dict(table)
        if decoded:
            decodes = [f["decode"] for f in fresh]
            out["decode"] = mean_ratio([{k: v for k, v in d.items() if k != "host"} for d in decodes], SERIAL_CLASSES)
            hosts = [d["host"] for d in decodes if "host" in d]
            if len(hosts) == len(decodes):  # the host work after each forward, the same way
                out["decode"]["host"] = mean_ratio(hosts, SERIAL_CLASSES)
        seconds = dict(table["seconds"])
        for width in fresh[0]["seconds"]:
            # a refresh's ratio is its decodes over its own cells, so its price (cells x ratio) does not move with the
            # cells' noise: the block prices the mean of those prices, stored as cells beside the mean ratio
            scales = ([class_ratio(f["decode"], width) / class_ratio(out["decode"], width) for f in fresh] if decoded
                      else [1.0] * len(fresh))
            columns = [[s * scale for s in f["seconds"][width]] for f, scale in zip(fresh, scales, strict=True)]
            seconds[width] = [sum(v) / len(v) for v in zip(*columns, strict=False)]
        out["seconds"] = seconds
        return out

    out["target"] = full["target"] | {"costs": mean_table(full["target"]["costs"],
                                                          [r["target"]["costs"] for r in samples])}
    drafters = []
    for entry in full["drafters"]:
        fresh = [next(d for d in r["drafters"] if d["name"] == entry["name"]) for r in refreshes]
        again = [d for r in interims for d in r["drafters"] if d["name"] == entry["name"]]
        entry = entry | {"costs": mean_table(entry["costs"], [f["costs"] for f in fresh + again])}
        if "costs_all_rows" in entry and all("costs_all_rows" in f for f in fresh + again):
            entry["costs_all_rows"] = mean_table(entry["costs_all_rows"],
                                                 [f["costs_all_rows"] for f in fresh + again])
        if "cosched" in entry and all("cosched" in f for f in fresh + again):
            entry["cosched"] = mean_ratios(entry["cosched"], [f["cosched"] for f in fresh],
                                           [f["cosched"] for f in again])
        drafters.append(entry)
    out["drafters"] = drafters
    warnings = [w for doc in (full, *samples) for w in doc.get("warnings", [])]
    if warnings:
        out["warnings"] = [w for i, w in enumerate(warnings) if w not in warnings[:i]]
    fresh_ratios = any("cosched" in d for r in refreshes for d in r["drafters"])
    between = f", its decode ratios with {len(interims)} timings between its passes" if interims else ""
    out["notes"] = (f"{full.get('notes', '')}; cost tables{' and co-scheduling ratios' if fresh_ratios else ''}: "
                    f"the mean of a block's two refreshes{between} (a cost: each one's cells times its own decode "
                    "ratio)")
    return out


def class_ratio(decode: dict, width: int) -> float:
    """A cost table's `decode` ratio at `width` as replay prices it (core/pricing.DecodeRatio.at): its width class's,
    else the pooled one."""
    return float(decode.get("single" if int(width) == 1 else "wider", decode)["realised"])


def mean_ratios(cosched: dict, fresh: Sequence[dict], interims: Sequence[dict] = ()) -> dict:
    """A profile's `cosched` block with every width the refreshes measured replaced by their mean, and
    the target's ratio in AS2D decodes (`decode`) by the means of the refreshes' and the `interims'` when each
    has one."""
    if any(f["depths"] != cosched["depths"] for f in fresh):
        raise SpecbenchError("a refresh measured co-scheduling ratios at other depths than the full profile")
    ratios = dict(cosched["ratios"])
    for width in fresh[0]["ratios"]:
        cells = [f["ratios"][width] for f in fresh if width in f["ratios"]]
        if len(cells) < len(fresh):
            continue  # a width one refresh could not measure keeps the full profile's ratios
        merged = {key: [sum(v) / len(v) for v in zip(*(c[key] for c in cells), strict=True)]
                  for key in ("rho_target", "rho_drafter")}
        if all("repetitions" in c for c in cells) and "repetitions" in next(iter(ratios.values())):
            merged["repetitions"] = [sum(v) for v in zip(*(c["repetitions"] for c in cells), strict=True)]
        if all("achieved_precision" in c for c in cells) and "achieved_precision" in next(iter(ratios.values())):
            # null: a cell with no interval, worse than any precision
            merged["achieved_precision"] = [None if None in v else max(v)
                                            for v in zip(*(c["achieved_precision"] for c in cells), strict=True)]
        ratios[width] = merged
    out = cosched | {"ratios": ratios}
    decodes = [f["decode"] for f in (*fresh, *interims) if "decode" in f]
    if decodes and len(decodes) == len(fresh) + len(interims):  # the target's ratio as each one's AS2D decodes met it
        out["decode"] = mean_decode(decodes)
    return out


def mean_decode(decodes: Sequence[dict]) -> dict:
    """Both lanes' ratios in AS2D decodes (a `cosched.decode` entry) as the mean of several measurements:
    ratios the mean, forwards the sum; a width class or producer ratio some measurement lacks is left out (priced
    at the pooled ratio, or the cells'); the producer's pace scatter pooled over the measurements that have one;
    the target's forwards after the producer summed, width by width, where every measurement has them."""
    out = mean_ratio([{k: v for k, v in d.items() if k != "after"} for d in decodes],
                     (*DECODE_CLASSES, "producer", *PRODUCER_CLASSES, "pace"))
    paces = [d["pace"] for d in decodes if "pace" in d]
    if paces:  # pooled as variances are
        sigma, pairs = pooled_sd((p["sigma"], p["pairs"]) for p in paces)
        out["pace"] = {"sigma": sigma, "pairs": pairs}
    afters = [d["after"] for d in decodes if "after" in d]
    if afters and len(afters) == len(decodes):  # sums, summed: the pooled ratio of every forward
        out["after"] = {width: {key: sum(a[width][key] for a in afters if width in a)
                                for key in ("seconds", "solo_seconds", "forwards")}
                        for width in sorted({w for a in afters for w in a})}
    return out


def mean_ratio(decodes: Sequence[dict], parts: Sequence[str]) -> dict:
    """Decode ratios (a `cosched.decode` entry, or a cost table's `decode` or its `host`) as the mean of several
    measurements: ratios (or seconds) the mean, forwards the sum; one of `parts` (a width class, the producer's)
    some measurement lacks is left out (priced at the pooled ratio, or the cells')."""
    out = {key: sum(d[key] for d in decodes) if key == "forwards" else sum(d[key] for d in decodes) / len(decodes)
           for key in decodes[0] if key not in parts and key != "below_one"}
    for name in parts:
        measured = [d[name] for d in decodes if name in d]
        if len(measured) == len(decodes):
            out[name] = {key: sum(p[key] for p in measured) if key == "forwards" else
                         sum(p[key] for p in measured) / len(measured) for key in measured[0]}
    return out
