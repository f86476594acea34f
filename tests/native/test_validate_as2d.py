"""`specbench validate` of AS2D on this host (SmolLM2-135M Q4_1 drafting for itself, small caps: a forward
lasts milliseconds, so its co-scheduling ratios are ratios of real work, where a tiny model's 50 µs forward
fits between preemptions): each block replays with the co-scheduling ratios its own refreshes measured, and
the decode records keep what explains AS2D's error (the lanes' timestamps and the producer's publication
record). No timing is asserted."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.fileio import load_yaml
from specbench.schemas.profiles import load_profile
from specbench.schemas.validation import (
    PRODUCER_KEYS,
    BlockRecord,
    CrossFitRecord,
    DecodeRecord,
    DecompositionRecord,
    SummaryRecord,
    load_records,
)
from specbench.schemas.windows import make_text_window, save_windows

pytestmark = pytest.mark.serial  # a validation block is voided or refused when something runs beside it

AS2D = "as2d[B=2,drafter=near]"


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


@pytest.mark.slow
def test_an_as2d_validation_refreshes_its_ratios_per_block_and_keeps_the_lanes_timestamps(runner, demo_model_path,
                                                                                          tmp_path):
    model = demo_model_path("smollm2-135m")
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window("w0", "hello the world", "Repeat this.", 6, "demo", "dev")])
    code, output = invoke("trace", windows, "--target", model, "--drafter", f"near={model}", "--k-max", 4,
                          "--device", "local", "--out", tmp_path / "traces")
    assert code == 0, output
    code, output = invoke("validate", windows, "--traces", tmp_path / "traces", "--target", model,
                          "--drafter", f"near={model}", "--method", "as2d:B=2", "--device", "local",
                          "--placement", "shared", "--depths", "0", "--block-windows", 1, "--min-blocks", 1,
                          "--max-blocks", 1, "--probe-threshold", 100000, "--max-voids", 0, "--cooldown", 0,
                          "--overheads-windows", 1, "--repeats", 2, "--out", tmp_path / "val")
    assert code == 0, output
    out = tmp_path / "val"
    where = out / "profiles" / "shared-b000"
    kept = [b.attempt for b in load_records(out, BlockRecord) if not b.voided]  # a busy host may void one
    refreshes = [load_profile(where / f"refresh-{i}-a{kept[0]}.yaml").drafter("near").cosched for i in (1, 2)]
    block = load_yaml(where / "profile.yaml")
    ratios = block["drafters"][0]["cosched"]["ratios"]
    assert sorted(ratios) == [1, 2, 3]  # AS2D B=2 verifies up to B + 1 tokens: the cells it prices
    for width, cell in ratios.items():  # the block's own ratios: the mean of its two refreshes
        for key in ("rho_target", "rho_drafter"):
            mine = [getattr(r, key)[width] for r in refreshes]
            assert cell[key] == [(a + b) / 2 for a, b in zip(*mine, strict=True)]
        assert cell["repetitions"] == [10]  # 5 per refresh at the one depth, both refreshes
    assert "co-scheduling ratios: the mean of a block's two refreshes" in block["notes"]
    # --overheads-windows 1: the full profile's overheads decodes took the tokens of one copy of the 48-token
    # window from the validation's windows (its one 6-token window, 8 times), and each refresh from its block's
    workload = "2 runs of 8 windows of the workload (48 tokens of cap)"
    assert workload in load_yaml(out / "profiles" / "full-shared.yaml")["notes"]
    assert workload in load_yaml(where / f"refresh-1-a{kept[0]}.yaml")["notes"]
    # each refresh timed the target's ratio in AS2D decodes too, and so did the decodes timed again between the
    # passes (--repeats 2: Na Nb Na Nb, three gaps), each against the first refresh's cells, with no sweep; the block
    # prices the mean of all five
    interims = [load_profile(where / f"interim-near-{k}-a{kept[0]}.yaml") for k in range(3)]
    assert not (where / f"interim-near-3-a{kept[0]}.yaml").exists()
    first = load_profile(where / f"refresh-1-a{kept[0]}.yaml")
    for again in interims:
        assert again.target_costs.seconds == first.target_costs.seconds  # the first refresh's cells
        cells, mine = first.drafter("near").cosched, again.drafter("near").cosched
        assert {w: list(v) for w, v in mine.rho_target.items()} == {w: list(v) for w, v in cells.rho_target.items()}
        assert again.notes.startswith("no sweep: the cells of ")
    assert not any(r.get("kind") in ("forward", "cosched") for r in map(json.loads, (
        where / f"interim-near-0-a{kept[0]}.samples.jsonl").read_text().splitlines()))  # its decodes alone
    met = [r.decode for r in refreshes] + [p.drafter("near").cosched.decode for p in interims]
    assert all(m is not None and m.forwards >= 1 and m.realised > 0 and m.priced > 0 for m in met)
    decode = block["drafters"][0]["cosched"]["decode"]
    assert {k: decode[k] for k in ("realised", "priced", "forwards")} == {
        "realised": pytest.approx(sum(m.realised for m in met) / 5),
        "priced": pytest.approx(sum(m.priced for m in met) / 5), "forwards": sum(m.forwards for m in met)}
    # each width class all five measured, at their mean (single-token steps: the producer drafts the whole
    # overheads decode, so all have them)
    assert all(m.single is not None for m in met)
    assert decode["single"] == {"realised": pytest.approx(sum(m.single for m in met) / 5),
                                "forwards": sum(m.single_forwards for m in met)}
    assert ("verify" in decode) == all(m.verify is not None for m in met)
    assert "its decode ratios with 3 timings between its passes" in block["notes"]
    decodes = [d for d in load_records(out, DecodeRecord) if d.config == AS2D and d.lossless and d.attempt == kept[0]]
    # --repeats 2: each run decoded the window twice, each repeat read beside its own target-only decode
    assert sorted((d.run, d.repeat) for d in decodes) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    every = [d for d in load_records(out, DecodeRecord) if d.attempt == kept[0]]
    assert all(d.config == ("target", AS2D)[d.slot] for d in every)  # Nb's decodes named in Na's slots
    for d in decodes:
        targets = [op for op in d.ops if op["model"] == "target"]
        assert targets and all({"t_us", "us", "published", "width", "depth"} <= set(op) for op in targets)
        assert d.producer is not None and set(PRODUCER_KEYS) - {"step"} <= set(d.producer)
        assert len(d.producer["publish_us"]) == len(d.producer["publish_count"]) == len(d.producer["publish_step"])
        assert len(d.producer["step_start_us"]) == len(d.producer["step_us"])
    serial = [d for d in load_records(out, DecodeRecord) if d.config == "target"]
    assert serial and all(d.producer is None for d in serial)
    # the speedup bias taken apart from those timestamps: every observation's lanes read back, the total is
    # the validation's bias and the product of its parts, the realised ratio recovered beside the priced one; one
    # observation per window and configuration, its runs' repeats taken together
    bias = next(s for s in load_records(out, SummaryRecord) if (s.config, s.metric) == (AS2D, "speedup"))
    parts = {p.part: p for p in load_records(out, DecompositionRecord)}
    assert set(parts) == {"total", "contention", "publication", "remains"}
    assert all((p.config, p.observations, p.left_out) == (AS2D, bias.observations, 0) for p in parts.values())
    assert parts["total"].factor == pytest.approx(bias.bias)
    assert parts["total"].excess_pct == pytest.approx(bias.excess_pct)  # each replay's E; as priced, the summary's
    assert all(parts[p].excess_pct is not None for p in ("contention", "publication"))
    assert parts["remains"].excess_pct is None
    product = parts["contention"].factor * parts["publication"].factor * parts["remains"].factor
    assert product == pytest.approx(parts["total"].factor)
    assert parts["contention"].rho_priced > 0 and parts["contention"].rho_realised > 0
    assert "AS2D's speedup bias, decomposed" in (out / "validation.md").read_text()
    # priced beside the decodes: the same configurations and observations, each fold at the other fold's ratios
    summary = {(s.config, s.metric): s for s in load_records(out, SummaryRecord)}
    beside = {(s.config, s.metric): s for s in load_records(out, CrossFitRecord)}
    assert set(beside) == set(summary)
    assert all(beside[k].observations == summary[k].observations for k in summary)
    assert "Replay fidelity priced beside the decodes" in (out / "validation.md").read_text()
    assert "a run (Na, Nb) is the mean of its 2 passes' decodes of the window (--repeats)" in (out / "validation.md").read_text()
