"""What a serial drafted decode's forwards cost as a native decode meets them (docs/METHODS.md §4.4 Overheads,
"Serial decodes"), pure.

A profile's cells time each model's forwards in short bursts of one model. A speculative decode alternates the
two models: a verification follows the drafter's steps, an ingest follows a verification, and each such forward
meets caches the other model has just used and a lane that has just idled, and more of the slow forwards a
burst's median leaves out. From the profile's overheads job, whose windows are decoded by target-only and by SD
in turn, `serial_decode` takes each class of SD's forwards (the target's single-token steps, its verifications,
the drafter's forwards): their time over the cells' price, over the same ratio of the target-only decodes'
forwards in the same job. The division cancels what moved the whole device between the cells and the decodes,
so that what is left is what a serial decode costs beyond a target-only one, and target-only stays priced at
its cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specbench.core.decomposition import solo_factor
from specbench.core.pricing import CLASS_FORWARDS, SERIAL_LIMITS, CostTable, SerialDecode

CLASSES = ("single", "verify", "drafter")
"""`SerialDecode`'s classes: the target's single-token forwards, its verifications, the drafter's forwards."""


def method_of(record: Mapping) -> str:
    """A runner decode record's method name (`target`, `sd`, `as2d`, ...)."""
    method = record.get("method")
    return str(method.get("name", "")) if isinstance(method, Mapping) else str(method or "")


def forward_class(op: Mapping) -> str:
    """The class of one op of an SD decode's op log."""
    if op["model"] != "target":
        return "drafter"
    return "single" if int(op["width"]) == 1 else "verify"


def serial_decode(decodes: Sequence[Mapping], target_costs: CostTable, drafter_costs: CostTable) -> SerialDecode | None:
    """The `SerialDecode` of a job's decode records (`kind: decode`): its SD decodes' forwards per class against
    the cells, over its target-only decodes' (`solo_factor`), each over the forwards whose width its table
    prices. None without both kinds of decode. A class is measured where it had CLASS_FORWARDS forwards and its
    ratio lies within SERIAL_LIMITS."""
    solo = [op for r in decodes if method_of(r) == "target" for op in r["ops"]]
    serial = [op for r in decodes if method_of(r) == "sd" for op in r["ops"]]
    if not any(op["model"] == "target" for op in solo) or not serial:
        return None
    k = solo_factor(solo, target_costs)
    sums = {name: [0.0, 0.0, 0] for name in CLASSES}  # -> [time us, price us, forwards]
    for op in serial:
        name = forward_class(op)
        table = drafter_costs if name == "drafter" else target_costs
        if int(op["width"]) not in table.seconds:
            continue  # a width the profile does not price (an AS2D profile's drafter holds width 1 alone)
        acc = sums[name]
        acc[0] += float(op["us"])
        acc[1] += 1e6 * table.cost(int(op["width"]), float(op["depth"]))
        acc[2] += 1
    fields: dict = {}
    for name, (time, price, forwards) in sums.items():
        ratio = time / price / k if price > 0 and k > 0 else 0.0
        measured = forwards >= CLASS_FORWARDS and SERIAL_LIMITS[0] <= ratio <= SERIAL_LIMITS[1]
        fields[name] = ratio if measured else None
        fields[f"{name}_forwards"] = int(forwards)
    return SerialDecode(**fields)
