"""The published JSON Schemas (docs/schemas/) against the loaders, the one truth: every shipped
example and golden file validates, files specbench writes validate, the keys each schema names
are the keys each loader knows, and hand-made bad files are refused by both."""

from __future__ import annotations

import copy
import json
import re
import shutil
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from specbench.core.budget import BudgetChoice
from specbench.core.methods.configs import As2dConfig
from specbench.errors import SpecbenchError
from specbench.schemas import profiles, results, timeline, traces, windows
from specbench.schemas.budgets import load_budget, save_budget
from specbench.schemas.results import load_results
from specbench.world.progdraft import import_progdraft
from tests.helpers import write_study

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schemas"
GOLDEN = ROOT / "tests" / "data" / "golden"
PROFILES = sorted((ROOT / "device_profiles").glob("*.yaml")) + sorted((ROOT / "tests" / "data").glob("*/*.yaml"))
PROFILES = [p for p in PROFILES if yaml.safe_load(p.read_text()).get("kind") == profiles.KIND]


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def registry() -> Registry:
    """Every published schema by its $id, so that one may refer to another (environment.schema.json)."""
    documents = [json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.schema.json"))]
    return Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in documents)


def validator(name: str, definition: str | None = None) -> Draft202012Validator:
    root = schema(name)
    if definition is not None:  # one of the schema's $defs, e.g. the version 1 result row
        root = {"$id": root["$id"], "$ref": f"#/$defs/{definition}", "$defs": root["$defs"]}
    return Draft202012Validator(root, registry=registry())


def as_json(doc):
    """A YAML document as JSON holds it (integer mapping keys become strings)."""
    return json.loads(json.dumps(doc, default=str))


def errors(name: str, doc, definition: str | None = None) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator(name, definition).iter_errors(as_json(doc))]


def jsonl_errors(name: str, path: Path) -> list[str]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert "kind" in lines[0] and not any("kind" in line for line in lines[1:]), path
    return [f"line {i + 1}: {e}" for i, line in enumerate(lines) for e in errors(name, line)]


def results_errors(directory: Path) -> list[str]:
    manifest = json.loads((directory / "manifest.json").read_text())
    found = errors("results-manifest", manifest)
    for i, line in enumerate((directory / "rows.jsonl").read_text().splitlines()):
        found += [f"row {i + 1}: {e}" for e in errors("results-row", json.loads(line))]
    timeline_path = directory / timeline.TIMELINE
    for i, line in enumerate(timeline_path.read_text().splitlines() if timeline_path.exists() else []):
        found += [f"timeline line {i + 1}: {e}" for e in errors("results-timeline", json.loads(line))]
    return found


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_every_schema_is_a_valid_draft_2020_12_schema(path):
    Draft202012Validator.check_schema(json.loads(path.read_text()))


def props(doc: dict) -> set[str]:
    return set(doc["properties"])


def test_the_schemas_name_the_keys_the_loaders_know():
    trace = schema("trace")["$defs"]
    assert props(trace["header"]) == traces._HEADER_KEYS
    assert props(trace["window"]) == traces._WINDOW_KEYS
    assert props(trace["drafts"]) == {"k_max", "tokens", "conf", "lookup", *traces._CROSS_KEYS}
    assert list(trace["header"]["properties"]["schema_version"]["enum"]) == list(traces.VERSIONS)
    win = schema("windows")["$defs"]
    assert props(win["window"]) == windows._WINDOW_KEYS and props(win["input"]) == windows._INPUT_KEYS
    assert list(win["header"]["properties"]["schema_version"]["enum"]) == list(windows.VERSIONS)
    profile = schema("profile")
    assert props(profile) == profiles._TOP_KEYS
    assert list(profile["properties"]["schema_version"]["enum"]) == list(profiles.VERSIONS)
    row = schema("results-row")["$defs"]["row"]
    assert list(row["properties"]) == list(results.ROW_FIELDS)
    assert row["required"] == list(results.ROW_FIELDS)  # the loader reads every key of a row
    manifest = schema("results-manifest")
    assert props(manifest) == {"kind", "schema_version", *(f.name for f in fields(results.ResultsManifest))}
    assert list(manifest["properties"]["schema_version"]["enum"]) == list(results.VERSIONS)
    timeline_schema = schema("results-timeline")
    assert list(timeline_schema["properties"]) == list(timeline.TIMELINE_FIELDS) == timeline_schema["required"]


# --- every shipped example and golden file, and what specbench writes, validates


def test_shipped_windows_validate():
    path = ROOT / "specbench" / "data" / "demo_windows.jsonl"
    windows.load_windows(path)
    assert jsonl_errors("windows", path) == []


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_profiles_validate(path):
    profiles.load_profile(path)
    assert errors("profile", yaml.safe_load(path.read_text())) == []


def test_a_profile_with_both_lanes_decode_ratios_validates_and_a_bad_one_is_refused_by_both(tmp_path):
    doc = yaml.safe_load((ROOT / "device_profiles" / "local-shared.yaml").read_text())
    doc["drafters"][0]["cosched"]["decode"] = {
        "realised": 1.0, "priced": 1.9, "forwards": 120, "single": {"realised": 1.0, "forwards": 60},
        "verify": {"realised": 1.7, "forwards": 60}, "producer": {"realised": 2.0, "priced": 3.6, "forwards": 140},
        "producer_single": {"realised": 1.9, "forwards": 100}, "producer_verify": {"realised": 2.4, "forwards": 40},
        "below_one": {"realised": 0.98, "single": 0.95}}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    profiles.load_profile(path)
    assert errors("profile", doc) == []
    doc["drafters"][0]["cosched"]["decode"]["producer"]["forwards"] = 3  # fewer than a ratio needs
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecbenchError):
        profiles.load_profile(path)
    assert errors("profile", doc) != []


def test_cost_tables_with_serial_decode_ratios_price_them_round_trip_and_a_bad_one_is_refused_by_both(tmp_path):
    doc = yaml.safe_load((ROOT / "device_profiles" / "local-shared.yaml").read_text())
    doc["target"]["costs"]["decode"] = {"realised": 1.1, "forwards": 90, "single": {"realised": 1.05, "forwards": 60},
                                        "wider": {"realised": 1.2, "forwards": 30}}
    # too few forwards for a class: the pooled ratio; a decode's host work can dwarf a tiny model's forward
    doc["drafters"][0]["costs"]["decode"] = {"realised": 150.0, "forwards": 4}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    profile = profiles.load_profile(path)
    assert errors("profile", doc) == []
    cells = doc["target"]["costs"]["seconds"]
    assert profile.target_costs.cost(1, 0) == pytest.approx(1.05 * cells[1][0])
    assert profile.target_costs.cost(3, 0) == pytest.approx(1.2 * cells[3][0])
    first = doc["drafters"][0]
    assert profile.drafter(first["name"]).costs.cost(1, 0) == pytest.approx(150 * first["costs"]["seconds"][1][0])
    profiles.save_profile(tmp_path / "again.yaml", profile)
    again = yaml.safe_load((tmp_path / "again.yaml").read_text())
    assert again["schema_version"] == profiles.VERSION
    assert again["target"]["costs"]["decode"] == doc["target"]["costs"]["decode"]
    assert again["target"]["costs"]["seconds"] == {int(w): v for w, v in cells.items()}  # the cells as measured
    for key, value, bad in (("forwards", 3, "a count >= 8"), ("realised", 2e4, "a ratio in \\(0, 10000\\]")):
        wrong = copy.deepcopy(doc)
        wrong["target"]["costs"]["decode"]["wider"][key] = value  # too few for a class; no clock's ratio
        path.write_text(yaml.safe_dump(wrong))
        with pytest.raises(SpecbenchError, match=rf"target.costs.decode.wider.{key}': expected {bad}"):
            profiles.load_profile(path)
        assert errors("profile", wrong) != []


@pytest.mark.parametrize("run", ["results", "sustained/cooldown", "sustained/no-cooldown"])
def test_golden_results_validate(run):
    load_results(GOLDEN / run)
    timeline.load_timeline(GOLDEN / run)
    assert results_errors(GOLDEN / run) == []


def test_golden_energy_results_validate():
    """A native run on the emulated phone with battery sampling: rows with energy, a manifest with `energy`."""
    manifest, rows = load_results(GOLDEN / "energy" / "results")
    assert manifest.energy is not None and rows["energy_j"].notna().all()
    assert results_errors(GOLDEN / "energy" / "results") == []


def test_written_studies_imports_and_budgets_validate(tmp_path):
    _, windows_path, traces_dir, profile_paths = write_study(tmp_path / "study", n_windows=4, n_devices=1)
    assert jsonl_errors("windows", windows_path) == []
    for path in sorted(traces_dir.glob("*.jsonl")):
        traces.load_trace_file(path)
        assert jsonl_errors("trace", path) == []
    for path in profile_paths:
        assert errors("profile", yaml.safe_load(path.read_text())) == []
    progdraft = ROOT / "tests" / "data" / "progdraft"
    import_progdraft([progdraft / "utt1.json", progdraft / "utt2.json"], tmp_path / "imported",
                     tmp_path / "imported-windows.jsonl", 448, 80, n_vocab=151936)
    assert jsonl_errors("windows", tmp_path / "imported-windows.jsonl") == []
    for path in sorted((tmp_path / "imported").glob("*.jsonl")):
        assert jsonl_errors("trace", path) == []  # null rows: the drafter never asked there
    choice = BudgetChoice("dev@split", As2dConfig(budget=3, drafter="small"), 51.5, (("as2d[B=4]", 50.0),), 3.0,
                          False, 4)
    save_budget(tmp_path / "budget.yaml", choice, {"profile": {"path": "p.yaml", "sha256": "0" * 64}})
    load_budget(tmp_path / "budget.yaml")
    assert errors("budget", yaml.safe_load((tmp_path / "budget.yaml").read_text())) == []


# --- a file the loader refuses, the schema refuses too


def _windows_lines():
    """The bundled windows (a version 1 file) as the current version, where a window may carry a category."""
    lines = [json.loads(line) for line in (ROOT / "specbench" / "data" / "demo_windows.jsonl").read_text().splitlines()]
    lines[0]["schema_version"] = windows.VERSION
    return lines


def _trace_lines(tmp_path):
    _, _, traces_dir, _ = write_study(tmp_path / "base", n_windows=2, n_devices=1)
    path = min(traces_dir.glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def _set(doc, keys, value):
    for key in keys[:-1]:
        doc = doc[key]
    if value is _DROP:
        del doc[keys[-1]]
    else:
        doc[keys[-1]] = value


_DROP = object()
BAD_WINDOWS = {
    "header kind": (0, ("kind",), "specbench.window"),
    "cap 0": (1, ("cap",), 0),
    "split train": (1, ("split",), "train"),
    "sha256 not hex": (1, ("window_sha256",), "ABC"),
    "unknown key": (1, ("speaker",), "alice"),
    "input kind video": (1, ("input", "kind"), "video"),
    "text input without text": (1, ("input", "text"), _DROP),
    "header version 3": (0, ("schema_version",), 3),
    "empty category": (1, ("category",), ""),
    "category as a number": (1, ("category",), 3),
}
BAD_TRACES = {
    "header version 6": (0, ("schema_version",), 6),
    "header version 4": (0, ("schema_version",), 4),
    "shard index 0": (0, ("shard",), {"index": 0, "count": 2}),
    "key k_max 0": (0, ("key",), {"runner_sha256": "ab", "windows_sha256": "cd", "n_windows": 2, "k_max": 0}),
    "key without windows digest": (0, ("key",), {"runner_sha256": "ab", "n_windows": 2, "k_max": 4}),
    "target without n_vocab": (0, ("target", "n_vocab"), _DROP),
    "drafter n_vocab 0": (0, ("drafter", "n_vocab"), 0),
    "n_prompt -1": (1, ("n_prompt",), -1),
    "header unknown key": (0, ("tokenizer",), "bpe"),
    "templates one model": (0, ("templates",), {"target": "chatml"}),
    "y empty": (1, ("y",), []),
    "stop length": (1, ("stop_reason",), "length"),
    "conf above 1": (1, ("drafts", "conf", 0, 0), 1.5),
    "k_max 0": (1, ("drafts", "k_max"), 0),
    "cross step without context": (1, ("drafts", "step"), [[]]),
    "producer stop done": (1, ("producer", "stop"), "done"),
    "token id 1.5": (1, ("y", 0), 1.5),
}


@pytest.mark.parametrize("case", sorted(BAD_WINDOWS))
def test_bad_windows_are_refused_by_loader_and_schema(tmp_path, case):
    line, keys, value = BAD_WINDOWS[case]
    lines = _windows_lines()
    _set(lines[line], keys, value)
    path = tmp_path / "windows.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in lines))
    with pytest.raises(SpecbenchError):
        windows.load_windows(path)
    assert errors("windows", lines[line])


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_bad_traces_are_refused_by_loader_and_schema(tmp_path, case):
    line, keys, value = BAD_TRACES[case]
    lines = _trace_lines(tmp_path)
    _set(lines[line], keys, value)
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in lines))
    with pytest.raises(SpecbenchError):
        traces.load_trace_file(path)
    assert errors("trace", lines[line])


PHONE = ROOT / "tests" / "data" / "progdraft" / "phone-shared.yaml"
BAD_PROFILES = {
    "version 2 without placement": (("placement",), _DROP),
    "negative cost": (("target", "costs", "seconds", 1, 0), -0.03),
    "width 0": (("target", "costs", "seconds", 0), [0.03, 0.033, 0.036]),
    "unknown top key": (("extras",), {}),
    "declared fraction and costs": (("drafters", 0, "costs"), {"depths": [0], "seconds": {1: [0.01]}}),
    "declared without source": (("drafters", 0, "declared", "source"), _DROP),
    "declared blank source": (("drafters", 0, "declared", "source"), "  "),
    "declared fraction negative": (("drafters", 0, "declared", "fraction_of_target"), -0.1),
    "declared table without costs": (("drafters", 1, "costs"), _DROP),
    "drafter unknown key": (("drafters", 1, "flops"), 3),
    "overheads negative": (("overheads", "publish_s"), -1.0),
    "lane threads 0": (("placement", "target", "threads"), 0),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profiles_are_refused_by_loader_and_schema(tmp_path, case):
    keys, value = BAD_PROFILES[case]
    doc = yaml.safe_load(PHONE.read_text())
    _set(doc, keys, value)
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecbenchError):
        profiles.load_profile(path)
    assert errors("profile", doc)


BAD_RESULTS = {
    "manifest kind": ("manifest", ("kind",), "specbench.result"),
    "manifest version 2": ("manifest", ("schema_version",), 2),
    "manifest version 3": ("manifest", ("schema_version",), 3),
    "manifest version 4": ("manifest", ("schema_version",), 4),
    "manifest version 6": ("manifest", ("schema_version",), 6),
    "category as a number": ("row", ("category",), 3),
    "no category": ("row", ("category",), _DROP),
    "drafter sha256 as a number": ("row", ("drafter_sha256",), 7),
    "decisions_match as text": ("row", ("decisions_match",), "yes"),
    "no decisions_match": ("row", ("decisions_match",), _DROP),
    "negative energy": ("row", ("energy_j",), -0.5),
    "energy samples as text": ("row", ("energy_samples",), "3"),
    "no energy_above_idle_j": ("row", ("energy_above_idle_j",), _DROP),
    "manifest without environment": ("manifest", ("environment",), _DROP),
    "row with negative tokens": ("row", ("tokens",), -1),
    "tokens as text": ("row", ("tokens",), "12"),
    "method beam": ("row", ("method",), "beam"),
    "no decode_s": ("row", ("decode_s",), _DROP),
    "lossless yes": ("row", ("lossless",), "yes"),
}


@pytest.mark.parametrize("case", sorted(BAD_RESULTS))
def test_bad_results_are_refused_by_loader_and_schema(tmp_path, case):
    where, keys, value = BAD_RESULTS[case]
    directory = tmp_path / "results"
    shutil.copytree(GOLDEN / "results", directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    rows = [json.loads(line) for line in (directory / "rows.jsonl").read_text().splitlines()]
    _set(manifest if where == "manifest" else rows[0], keys, value)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    (directory / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SpecbenchError):
        load_results(directory)
    assert results_errors(directory)


BAD_BUDGETS = {
    "B 0": (("as2d", "B"), 0),
    "align middle": (("as2d", "align"), "middle"),
    "conf_stop 2": (("as2d", "conf_stop"), 2.0),
    "unknown key": (("chosen_by",), "me"),
    "kind": (("kind",), "specbench.budgets"),
    "no device": (("device",), _DROP),
}


@pytest.mark.parametrize("case", sorted(BAD_BUDGETS))
def test_bad_budgets_are_refused_by_loader_and_schema(tmp_path, case):
    keys, value = BAD_BUDGETS[case]
    choice = BudgetChoice("dev@split", As2dConfig(budget=3), 51.5, (), 0.0, False, 4)
    save_budget(tmp_path / "budget.yaml", choice, {})
    doc = copy.deepcopy(yaml.safe_load((tmp_path / "budget.yaml").read_text()))
    _set(doc, keys, value)
    (tmp_path / "budget.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecbenchError):
        load_budget(tmp_path / "budget.yaml")
    assert errors("budget", doc)


# What the loader refuses and a schema cannot express (relations between values): each is named in
# docs/schemas/README.md, and must stay refused by the loader.
GAPS = {
    "a null row in tokens only": ("trace", 1, ("drafts", "tokens", 0), None),
    "a token id within the header's vocabulary": ("trace", 1, ("y", 0), 1_000_000_000),
    "one draft row per token of y": ("trace", 1, ("drafts", "tokens"), [[]]),
    "an integral number as a token id (1.0)": ("trace", 1, ("y", 0), 1.0),
    "a text window's sha256 is its content's": ("windows", 1, ("window_sha256",), "0" * 64),
    "increasing depths": ("profile", None, ("target", "costs", "depths"), [256, 0, 512]),
    "one cost per depth": ("profile", None, ("target", "costs", "seconds", 1), [0.03]),
    "a row's fields and label name one configuration": ("results-row", 0, ("width",), 6),
}


@pytest.mark.parametrize("case", sorted(GAPS))
def test_what_only_the_loader_checks_is_documented_and_refused(tmp_path, case):
    kind, line, keys, value = GAPS[case]
    assert f"* {case}" in (SCHEMAS / "README.md").read_text()
    if kind == "profile":
        doc = yaml.safe_load(PHONE.read_text())
        _set(doc, keys, value)
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
        load, target = (lambda: profiles.load_profile(tmp_path / "p.yaml")), doc
    elif kind == "results-row":
        directory = tmp_path / "results"
        shutil.copytree(GOLDEN / "results", directory)
        rows = [json.loads(r) for r in (directory / "rows.jsonl").read_text().splitlines()]
        rows = [r for r in rows if r["method"] == "sd" and r["width"] == 5][:1]
        _set(rows[0], keys, value)
        (directory / "rows.jsonl").write_text(json.dumps(rows[0]) + "\n")
        load, target = (lambda: load_results(directory)), rows[0]
    else:
        lines = _trace_lines(tmp_path) if kind == "trace" else _windows_lines()
        _set(lines[line], keys, value)
        path = tmp_path / "file.jsonl"
        path.write_text("".join(json.dumps(doc) + "\n" for doc in lines))
        load, target = (lambda: (traces.load_trace_file if kind == "trace" else windows.load_windows)(path)), lines[line]
    with pytest.raises(SpecbenchError):
        load()
    assert errors(kind, target) == []


def test_null_rows_are_version_3_and_a_token_list_per_row_elsewhere():
    line = {"window_id": "w", "window_sha256": "0" * 64, "y": [1, 2], "stop_reason": "eos", "n_prompt": 3,
            "drafts": {"k_max": 2, "tokens": [[1, 2], None], "conf": [[0.5, 0.5], None]}}
    assert errors("trace", line) == []
    trace = traces.window_trace_from_dict(line, traces.Where("test"), traces.Vocab(1 << 20, 1 << 20))
    assert trace.drafts.has_row(0) and not trace.drafts.has_row(1)
    assert np.array_equal(trace.drafts.recorded, [True, False])


# --- range checks: one line naming file, line, key, value and range --------------------------


def _trace_file(tmp_path, header=None, window=None) -> Path:
    doc = {"kind": "specbench.trace", "schema_version": traces.VERSION, "target": {"name": "t", "sha256": "a",
           "n_vocab": 49152}, "drafter": {"name": "d", "sha256": "b", "n_vocab": 32000}} | (header or {})
    line = {"window_id": "w", "window_sha256": "0" * 64, "y": [5, 9, 2, 7], "stop_reason": "eos", "n_prompt": 3,
            "drafts": {"k_max": 2, "tokens": [[9, 2], [2], [7], []], "conf": [[0.5, 0.5], [0.9], [1.0], []]},
            "producer": {"tokens": [9, 2], "conf": [0.8, 0.7], "step": [0, 1], "steps": 2, "stop": "eos"},
            "recycle": {"specasr[k_max=2,tau=0.5]": [{"t": 1, "tail": [2], "top1": [2, 7], "conf": [0.9, 0.8],
                                                     "kept": 1, "cont": [7], "cont_conf": [0.6]}]}}
    for keys, value in (window or {}).items():
        _set(line, keys, value)
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(doc) + "\n\n" + json.dumps(line) + "\n")
    return path


RANGE_CASES = {
    "y beyond the target vocabulary": ((("y", 3), 1_000_000_000),
                                       "y[3] = 1000000000, expected a token id in [0, 49152) (target vocabulary)"),
    "a negative y": ((("y", 0), -2), "y[0] = -2, expected a token id in [0, 49152) (target vocabulary)"),
    "a draft beyond the target vocabulary": ((("drafts", "tokens", 1, 0), 49152),
                                             "drafts.tokens[1][0] = 49152, expected a token id in [0, 49152)"),
    "a negative id other than the padding": ((("drafts", "tokens", 0, 1), -2),
                                             "drafts.tokens[0][1] = -2, expected a token id in [0, 49152)"),
    "a token after the padding": ((("drafts", "tokens", 0), [-1, 2]),
                                  "drafts.tokens[0][1] = 2, expected -1 (padding, once begun, runs to the row's end)"),
    "a producer token beyond the vocabulary": ((("producer", "tokens", 1), 60000),
                                               "producer.tokens[1] = 60000, expected a token id in [0, 49152)"),
    "a recycling answer beyond the drafter's vocabulary": (
        (("recycle", "specasr[k_max=2,tau=0.5]", 0, "top1", 1), 40000),
        "recycle.specasr[k_max=2,tau=0.5][0].top1[1] = 40000, expected a token id in [0, 32000) (drafter vocabulary)"),
    "a recycling position past y": ((("recycle", "specasr[k_max=2,tau=0.5]", 0, "t"), 5),
                                    "recycle.specasr[k_max=2,tau=0.5][0].t = 5, expected a position in [0, 4]"),
    "a probability above 1": ((("drafts", "conf", 0, 1), 1.25),
                              "drafts.conf[0][1] = 1.25, expected a probability in [0, 1]"),
    "a negative probability": ((("producer", "conf", 0), -0.5),
                               "producer.conf[0] = -0.5, expected a probability in [0, 1]"),
    "a negative prompt depth": ((("n_prompt",), -1), "n_prompt = -1, expected an integer >= 0"),
    "a negative drafter prompt depth": ((("n_prompt_drafter",), -4), "n_prompt_drafter = -4, expected an integer >= 0"),
    "a negative producer step count": ((("producer", "steps"), -1), "producer.steps = -1, expected an integer >= 0"),
}


@pytest.mark.parametrize("case", sorted(RANGE_CASES))
def test_a_trace_field_out_of_range_is_refused_in_one_line(tmp_path, case):
    (keys, value), message = RANGE_CASES[case]
    path = _trace_file(tmp_path, window={keys: value})
    with pytest.raises(SpecbenchError) as error:
        traces.load_trace_file(path)
    assert str(error.value).startswith(f"{path}:3: {message}") and "\n" not in str(error.value)


def test_a_valid_trace_of_the_range_fixture_loads(tmp_path):
    trace = traces.load_trace_file(_trace_file(tmp_path)).windows["w"]
    assert trace.y.tolist() == [5, 9, 2, 7] and trace.drafts.tokens[1].tolist() == [2, traces.PAD]


def test_a_header_vocabulary_below_one_is_refused(tmp_path):
    path = _trace_file(tmp_path, header={"target": {"name": "t", "sha256": "a", "n_vocab": 0}})
    with pytest.raises(SpecbenchError, match=rf"^{path}:1: target\.n_vocab = 0, expected an integer >= 1"):
        traces.load_trace_file(path)


@pytest.mark.parametrize("keys, value, message", [
    (("input", "offset_s"), -0.5, "input.offset_s = -0.5, expected seconds >= 0"),
    (("input", "duration_s"), 0.0, "input.duration_s = 0.0, expected seconds > 0"),
    (("cap",), 0, "cap = 0, expected an integer >= 1"),
])
def test_a_window_field_out_of_range_is_refused_in_one_line(tmp_path, keys, value, message):
    line = {"window_id": "a", "window_sha256": "0" * 64, "input": {"kind": "audio", "audio_path": "a.wav",
            "offset_s": 0.0, "duration_s": 2.0}, "instruction": "Transcribe.", "template": "model", "cap": 8,
            "dataset": "d", "split": "test"}
    _set(line, keys, value)
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"kind": "specbench.windows", "schema_version": 1}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(SpecbenchError, match=rf"^{path}:2: {re.escape(message)}"):
        windows.load_windows(path)


@pytest.mark.parametrize("keys, value, message", [
    (("as2d", "B"), 0, "B=0 is out of range (expected an integer >= 1)"),
    (("as2d", "H"), -1, "H=-1 is out of range (expected an integer >= 1)"),
    (("as2d", "conf_stop"), 1.5, "conf_stop=1.5 is out of range (expected a finite number in [0, 1])"),
    (("selection", "tokens_per_s"), -3.0, "selection.tokens_per_s = -3.0, expected tokens per second >= 0"),
    (("selection", "dev_windows"), 0, "selection.dev_windows = 0, expected an integer >= 1"),
])
def test_a_budget_field_out_of_range_is_refused_in_one_line(tmp_path, keys, value, message):
    choice = BudgetChoice("dev@split", As2dConfig(budget=3), 51.5, (), 0.0, False, 4)
    path = tmp_path / "budget.yaml"
    save_budget(path, choice, {})
    doc = yaml.safe_load(path.read_text())
    _set(doc, keys, value)
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecbenchError, match=rf"^{path}: {re.escape(message)}"):
        load_budget(path)


def test_the_host_work_after_each_forward_is_priced_round_trips_and_a_bad_one_is_refused_by_both(tmp_path):
    doc = yaml.safe_load((ROOT / "device_profiles" / "local-shared.yaml").read_text())
    host = {"seconds": 2e-4, "forwards": 90, "single": {"seconds": 5e-5, "forwards": 60},
            "wider": {"seconds": 5e-4, "forwards": 30}}
    doc["target"]["costs"]["decode"] = {"realised": 1.0, "forwards": 90, "host": host}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    profile = profiles.load_profile(path)
    assert errors("profile", doc) == []
    cells = doc["target"]["costs"]["seconds"]
    assert profile.target_costs.price(1, 0) == pytest.approx(cells[1][0] + 5e-5)
    assert profile.target_costs.price(3, 0) == pytest.approx(cells[3][0] + 5e-4)
    profiles.save_profile(tmp_path / "again.yaml", profile)
    assert yaml.safe_load((tmp_path / "again.yaml").read_text())["target"]["costs"]["decode"]["host"] == host
    for key, value, bad in (("seconds", -1e-6, "seconds in \\[0, 3600\\]"), ("forwards", 3, "a count >= 8")):
        wrong = copy.deepcopy(doc)
        wrong["target"]["costs"]["decode"]["host"]["single"][key] = value
        path.write_text(yaml.safe_dump(wrong))
        with pytest.raises(SpecbenchError, match=rf"target.costs.decode.host.single.{key}': expected {bad}"):
            profiles.load_profile(path)
        assert errors("profile", wrong) != []
