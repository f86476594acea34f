"""Every numeric field of every record kind is range-checked where it enters: a value outside its
range in a results row, a window, a budget, a trace line or a profile is refused in one line naming
the file and the key (issue 31)."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.core.methods.configs import TargetConfig, row_fields
from specbench.errors import SpecbenchError
from specbench.schemas.budgets import load_budget
from specbench.schemas.fileio import dump_yaml, load_yaml
from specbench.schemas.profiles import load_profile
from specbench.schemas.results import COUNTS, MAX_ROW_S, SECONDS, ResultsDir, WindowResult
from specbench.schemas.traces import ModelRef, TraceWriter, load_trace_file
from specbench.schemas.windows import load_windows, make_text_window, save_windows
from tests.helpers import results_manifest

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "tests" / "data" / "golden" / "demo" / "device_profiles" / "local-split.yaml"

negative = st.one_of(st.integers(-10**6, -1), st.floats(-1e300, -1e-9))
huge = st.floats(1e5, 1e308)


def refused(load, path: Path, key: str) -> None:
    """`load()` raises one line naming `path` and `key`."""
    with pytest.raises(SpecbenchError) as error:
        load()
    text = str(error.value)
    assert "\n" not in text and str(path) in text and key in text, text


def _row_doc() -> dict:
    row = WindowResult(device="A", **row_fields(TargetConfig()), window_id="w1", window_sha256="s" * 64, dataset="d",
                       split="test", tokens=10, decode_s=1.0, target_forwards=10, proposed=0, accepted=0,
                       multi_token_forwards=0, drafter_forwards=0, d_s=0.0, v_s=1.0, o_s=0.0, h_s=0.0,
                       extrapolated=False, lossless=True)
    return {name: getattr(row, name) for name in row.__dataclass_fields__} | {"reached_at": [], "accepted_at": []}


@settings(max_examples=60, deadline=None)
@given(column=st.sampled_from(COUNTS + SECONDS), value=negative)
def test_a_row_count_or_time_below_zero_is_refused(tmp_path_factory, column, value):
    directory = tmp_path_factory.mktemp("rows")
    results = ResultsDir(directory)
    results.open(results_manifest(mode="replay"), resume=False)
    value = min(int(value), -1) if column in COUNTS else float(value)
    results.rows_path.write_text(json.dumps(_row_doc() | {column: value}) + "\n")
    refused(results.frame, results.rows_path, f"line 1.{column}")


@settings(max_examples=40, deadline=None)
@given(column=st.sampled_from(SECONDS), value=huge.filter(lambda v: v > MAX_ROW_S))
def test_a_row_time_beyond_a_day_is_refused(tmp_path_factory, column, value):
    directory = tmp_path_factory.mktemp("rows")
    results = ResultsDir(directory)
    results.open(results_manifest(mode="replay"), resume=False)
    results.rows_path.write_text(json.dumps(_row_doc() | {column: value}) + "\n")
    refused(results.frame, results.rows_path, f"line 1.{column}")


@settings(max_examples=30, deadline=None)
@given(cap=st.integers(-10**6, 0))
def test_a_window_cap_below_one_is_refused(tmp_path_factory, cap):
    path = tmp_path_factory.mktemp("windows") / "windows.jsonl"
    save_windows(path, [make_text_window("w1", "hello", "Repeat.", 8, "d", "dev")])
    lines = path.read_text().splitlines()
    doc = json.loads(lines[1])
    doc["cap"] = cap
    path.write_text("\n".join([lines[0], json.dumps(doc)]) + "\n")
    refused(lambda: load_windows(path), path, "cap")


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["B", "batch", "H", "conf_stop"]), value=st.one_of(negative, huge))
def test_a_budget_parameter_out_of_range_is_refused(tmp_path_factory, key, value):
    path = tmp_path_factory.mktemp("budget") / "budget.yaml"
    as2d = {"B": 3, "drafter": "small"} | {key: float(value) if key == "conf_stop" else int(min(value, -1))}
    path.write_text(yaml.safe_dump({"kind": "specbench.budget", "schema_version": 1, "device": "A", "as2d": as2d}))
    refused(lambda: load_budget(path), path, f"{key if key != 'B' else 'budget'}")


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(["n_prompt", "n_prompt_drafter", "y", "conf"]), value=st.one_of(negative, huge))
def test_a_trace_count_token_or_probability_out_of_range_is_refused(tmp_path_factory, key, value):
    path = tmp_path_factory.mktemp("trace") / "small.jsonl"
    model = ModelRef("t", "0" * 64, 100)
    writer = TraceWriter(path, target=model, drafter=ModelRef("small", "1" * 64, 100))
    writer.write_window(window_id="w1", window_sha256="s" * 64, y=[5, 9, 2], stop_reason="eos", n_prompt=3,
                        drafts={"k_max": 2, "tokens": [[5, 9], [9], [2]], "conf": [[0.9, 0.8], [0.7], [0.6]]})
    writer.finish("2026-12-02T00:00:00.000Z")
    lines = path.read_text().splitlines()
    doc = json.loads(lines[1])
    if key == "y":
        doc["y"][1] = min(int(value), -1) if value < 0 else 100 + int(min(value, 10**9))  # < 0 or >= n_vocab
    elif key == "conf":
        doc["drafts"]["conf"][0][0] = float(value) if value < 0 else 1 + float(value)
    else:
        doc[key] = int(min(value, -1))
    path.write_text("\n".join([lines[0], json.dumps(doc)]) + "\n")
    refused(lambda: load_trace_file(path), path, key)


@functools.cache
def profile_doc() -> dict:
    return load_yaml(PROFILE)


@settings(max_examples=40, deadline=None)
@given(where=st.sampled_from(["target", "drafter", "rho_target", "rho_drafter"]),
       value=st.one_of(negative, st.floats(3601, 1e308), st.just(0.0)))
def test_a_profile_cost_or_ratio_out_of_range_is_refused(tmp_path_factory, where, value):
    doc = copy.deepcopy(profile_doc())
    drafter = doc["drafters"][0]
    if where == "target":
        doc["target"]["costs"]["seconds"][1][0] = value
    elif where == "drafter":
        drafter["costs"]["seconds"][1][0] = value
    else:
        drafter["cosched"]["ratios"][1][where][0] = value if value <= 0 or value > 3600 else 101 + value
    path = tmp_path_factory.mktemp("profile") / "p.yaml"
    path.write_text(dump_yaml(doc))
    refused(lambda: load_profile(path), path, where if where.startswith("rho") else "costs.seconds.1[0]")
