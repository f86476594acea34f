"""The manifest's `energy` record (schemas/results.py): round trip, what a resume compares, and
bad values named by key."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.schemas.results import ResultsDir, manifest_from_dict, manifest_to_dict, read_manifest

ENERGY = Path(__file__).resolve().parents[1] / "data" / "golden" / "energy" / "results"


def test_energy_record_round_trips():
    manifest = read_manifest(ENERGY / "manifest.json")
    assert manifest.energy is not None and manifest.energy.idle_w is not None
    assert manifest_from_dict(manifest_to_dict(manifest), ENERGY / "manifest.json") == manifest


def test_resume_compares_what_was_asked_not_what_was_found(tmp_path):
    shutil.copytree(ENERGY, tmp_path / "run")
    results = ResultsDir(tmp_path / "run")
    manifest = read_manifest(results.manifest_path)
    asked = replace(manifest.energy, no_source=None, convention=None, detected=False, status=None, samples=0,
                    idle_w=None, idle_samples=None, idle_start_us=None, idle_end_us=None)
    done = results.open(replace(manifest, energy=asked), resume=True)
    assert len(done) == 9
    other = replace(asked, interval_ms=asked.interval_ms * 2)
    with pytest.raises(SpecbenchError, match="cannot resume: manifest field 'energy' differs"):
        results.open(replace(manifest, energy=other), resume=True)
    with pytest.raises(SpecbenchError, match="cannot resume: manifest field 'energy' differs"):
        results.open(replace(manifest, energy=None), resume=True)


@pytest.mark.parametrize("key, value, expected", [
    ("interval_ms", 0, "milliseconds >= 1"),
    ("idle_w", "0.5", "expected"),
    ("unknown", 1, "unknown"),
])
def test_bad_energy_record_names_the_key(tmp_path, key, value, expected):
    doc = json.loads((ENERGY / "manifest.json").read_text())
    doc["energy"][key] = value
    with pytest.raises(SpecbenchError, match=expected) as info:
        manifest_from_dict(doc, tmp_path / "manifest.json")
    assert "energy" in str(info.value)
