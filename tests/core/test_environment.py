"""The environment block's schema: round trip, every bad value named, sessions of a resumed
results directory, and results manifests without the block refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.errors import SchemaError, SpecbenchError
from specbench.schemas.environment import (
    Environment,
    LoadedModel,
    RunnerBuild,
    environment_from_dict,
    environment_to_dict,
)
from specbench.schemas.fileio import Where
from specbench.schemas.results import ResultsDir, load_results, manifest_to_dict
from tests.helpers import results_manifest

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
RUNNER = RunnerBuild("0.1.0", 1, "ab" * 32, "c0ffee", ("-DGGML_NATIVE=OFF",), "CPU : AVX2 = 1 | ")
MODEL = LoadedModel("target", "t", "cd" * 32, "llama 135M F16", 134_515_008, 269_030_016)


def env(started="2026-12-01T13:00:00.000Z", runner=RUNNER, argv=("specbench", "run")) -> Environment:
    return Environment("0.1.0", argv, started, runner=runner)


def test_round_trip_through_json():
    doc = environment_to_dict(env().finish("2026-12-01T13:00:05.250Z", [MODEL]))
    again = environment_from_dict(json.loads(json.dumps(doc)), Where("m.json", "environment"))
    assert again == env().finish("2026-12-01T13:00:05.250Z", [MODEL]) and again.models == (MODEL,)


@pytest.mark.parametrize("change, key, expected", [
    ({"started": "2026-12-01 13:00"}, "environment.started", "a UTC ISO-8601 timestamp"),
    ({"started": "2026-12-01T13:00:00+02:00"}, "environment.started", "a UTC ISO-8601 timestamp"),
    ({"finished": "2026-12-01T12:59:59.000Z"}, "environment", "started <= each resume's start <= finished"),
    ({"argv": "specbench run"}, "environment.argv", "a list"),
    ({"models": [{**vars(MODEL), "n_params": 0}]}, "environment.models[0].n_params", "an integer > 0"),
    ({"models": [{**vars(MODEL), "role": "oracle"}]}, "environment.models[0].role", "'target' or 'drafter'"),
    ({"runner": {"sha256": "ab"}}, "environment.runner.flags", "a list (missing)"),
    ({"colour": "blue"}, "environment.colour", "unknown key"),
])
def test_a_bad_value_is_named_with_what_was_expected(change, key, expected):
    doc = environment_to_dict(env()) | change
    with pytest.raises(SchemaError) as err:
        environment_from_dict(doc, Where("m.json", "environment"))
    assert err.value.key == key and expected in str(err.value)


def test_a_resume_keeps_the_first_session_and_refuses_another_runner(tmp_path):
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(env()), resume=False)
    results.finish("2026-12-01T13:00:09.000Z", [MODEL])
    later = env("2026-12-01T14:00:00.000Z", argv=("specbench", "run", "--resume"))
    results.open(results_manifest(later), resume=True)
    results.finish("2026-12-01T14:00:03.000Z")
    manifest, _ = load_results(tmp_path / "r")
    got = manifest.environment
    assert (got.started, got.argv, got.models, got.finished) == (env().started, env().argv, (MODEL,),
                                                                   "2026-12-01T14:00:03.000Z")
    assert [(r.started, r.argv) for r in got.resumes] == [(later.started, later.argv)]
    assert manifest.command == "specbench run"
    rebuilt = env("2026-12-01T15:00:00.000Z", runner=RunnerBuild("0.1.0", 1, "ef" * 32, "c0ffee", (), ""))
    with pytest.raises(SpecbenchError, match="manifest field 'environment.runner' differs"):
        results.open(results_manifest(rebuilt), resume=True)


def test_the_golden_manifest_names_its_command_and_one_without_the_block_is_refused(tmp_path):
    manifest, rows = load_results(GOLDEN / "results")
    assert manifest.command.startswith("specbench run windows.jsonl --traces traces") and len(rows) > 0
    results = ResultsDir(tmp_path / "r")
    results.open(results_manifest(env()), resume=False)
    doc = manifest_to_dict(load_results(tmp_path / "r")[0])
    del doc["environment"]
    results.manifest_path.write_text(json.dumps(doc))
    with pytest.raises(SchemaError) as err:
        load_results(tmp_path / "r")
    assert str(err.value) == (f"{results.manifest_path}: key 'environment': expected a mapping (missing; the "
                              "session that wrote the run)")
