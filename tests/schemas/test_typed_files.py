"""Profiles and results manifests round-trip through their dataclasses, files of the previous
format version are refused naming both versions, and every cost, ratio and overhead of a
profile is range-checked where the file enters."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from specbench.core.pricing import CLASS_FORWARDS
from specbench.errors import SpecbenchError
from specbench.schemas import profiles
from specbench.schemas.profiles import load_profile, profile_from_dict, profile_to_dict, save_profile
from specbench.schemas.results import load_results, manifest_from_dict, manifest_to_dict, read_manifest
from tests.helpers import results_manifest, write_study

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted([*ROOT.glob("device_profiles/*.yaml"), *(ROOT / "tests" / "data").rglob("*.yaml")])
PROFILES = [p for p in PROFILES if yaml.safe_load(p.read_text()).get("kind") == profiles.KIND]
MANIFESTS = sorted((ROOT / "tests" / "data").rglob("manifest.json"))
HINT = " (hint: write the file again with this specbench)"


def test_the_committed_fixtures_are_found():
    assert len(PROFILES) >= 3 and MANIFESTS


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_profile_is_its_dataclass_and_back(path, tmp_path):
    profile = load_profile(path)
    assert profile_to_dict(profile) == yaml.safe_load(path.read_text())  # every key kept, nothing added
    save_profile(tmp_path / "again.yaml", profile)
    again = load_profile(tmp_path / "again.yaml")
    assert profile_to_dict(again) == profile_to_dict(profile)
    assert (again.device, again.placement, again.pinning, again.snapshot, again.notes, again.target_threads,
            again.runner, again.environment, again.warnings) == \
        (profile.device, profile.placement, profile.pinning, profile.snapshot, profile.notes, profile.target_threads,
         profile.runner, profile.environment, profile.warnings)


def test_written_synthetic_profiles_round_trip(tmp_path):
    _, _, _, paths = write_study(tmp_path / "study", n_windows=2, n_devices=1)
    for path in paths:
        assert profile_to_dict(load_profile(path)) == yaml.safe_load(path.read_text())


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_manifest_is_its_dataclass_and_back(path):
    manifest = read_manifest(path)
    assert manifest_to_dict(manifest) == json.loads(path.read_text())
    assert manifest_from_dict(manifest_to_dict(manifest), path) == manifest


@pytest.mark.parametrize("mode", ["replay", "native"])
def test_a_written_manifest_loads_as_the_one_written(tmp_path, mode):
    from specbench.schemas.results import ResultsDir

    manifest = results_manifest(mode=mode)
    ResultsDir(tmp_path / "r").open(manifest, resume=False)
    assert load_results(tmp_path / "r")[0] == manifest


def test_a_profile_of_the_previous_version_is_refused_naming_both_versions(tmp_path):
    doc = yaml.safe_load(PROFILES[0].read_text())
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(doc | {"schema_version": profiles.VERSION - 1}))
    with pytest.raises(SpecbenchError) as error:
        load_profile(path)
    assert str(error.value) == (f"{path}: schema_version {profiles.VERSION - 1}, this specbench reads "
                                f"{profiles.VERSION}{HINT}")


def _local() -> dict:
    return yaml.safe_load((ROOT / "device_profiles" / "local-shared.yaml").read_text())


def _set(doc: dict, keys: tuple, value) -> dict:
    doc = copy.deepcopy(doc)
    here = doc
    for key in keys[:-1]:
        here = here[key]
    here[keys[-1]] = value
    return doc


COST = "costs in seconds: finite and > 0 and <= 3600"
RATIO = "slowdown ratios: finite and > 0 and <= 100"
BAD = {
    "target cost 0": (("target", "costs", "seconds", 1), [0.0, 0.0096], "target.costs.seconds.1[0]",
                      COST, "0.0"),
    "target cost negative": (("target", "costs", "seconds", 2), [0.018, -0.5], "target.costs.seconds.2[1]",
                             COST, "-0.5"),
    "drafter cost infinite": (("drafters", 0, "costs", "seconds", 1), [float("inf"), 0.01],
                              "drafters[0].costs.seconds.1[0]", COST, "inf"),
    "all-rows cost nan": (("drafters", 0, "costs_all_rows", "seconds", 1), [float("nan"), 0.01],
                          "drafters[0].costs_all_rows.seconds.1[0]", COST, "nan"),
    "co-scheduling ratio 0": (("drafters", 0, "cosched", "ratios", 1, "rho_target"), [0, 1.1],
                              "drafters[0].cosched.ratios.1.rho_target[0]", RATIO, "0"),
    "target cost an age": (("target", "costs", "seconds", 2), [0.018, 1e300], "target.costs.seconds.2[1]",
                           COST, "1e+300"),
    "co-scheduling ratio huge": (("drafters", 0, "cosched", "ratios", 1, "rho_drafter"), [1.1, 1e300],
                                 "drafters[0].cosched.ratios.1.rho_drafter[1]",
                                 RATIO, "1e+300"),
    "co-scheduling ratio below its noise": (("drafters", 0, "cosched", "ratios", 1, "rho_target"), [0.2, 1.1],
                                            "drafters[0].cosched.ratios.1.rho_target[0]",
                                            "a slowdown ratio >= 0.706 (1 minus twice the lanes' measured spread, "
                                            "at least 0.25), one whose recorded interval reaches 1, or one the "
                                            "profile warns of", "0.2"),
    "decode contention of 0": (("drafters", 0, "cosched", "decode"), {"realised": 0, "priced": 1.1, "forwards": 9},
                               "drafters[0].cosched.decode.realised", "a ratio in (0, 100]", "0"),
    "decode contention of no forwards": (("drafters", 0, "cosched", "decode"),
                                         {"realised": 1.2, "priced": 1.1, "forwards": 0},
                                         "drafters[0].cosched.decode.forwards", "a count >= 1", "0"),
    "a width class of too few forwards": (("drafters", 0, "cosched", "decode"),
                                          {"realised": 1.2, "priced": 1.1, "forwards": 9,
                                           "single": {"realised": 1.4, "forwards": 3}},
                                          "drafters[0].cosched.decode.single.forwards", "a count >= 8", "3"),
    "a width class of ratio 0": (("drafters", 0, "cosched", "decode"),
                                 {"realised": 1.2, "priced": 1.1, "forwards": 9,
                                  "verify": {"realised": 0.0, "forwards": 9}},
                                 "drafters[0].cosched.decode.verify.realised", "a ratio in (0, 100]", "0.0"),
    "a ratio below 1 where the class prices more": (("drafters", 0, "cosched", "decode"),
                                                      {"realised": 1.2, "priced": 1.1, "forwards": 9,
                                                       "below_one": {"realised": 0.9}},
                                                      "drafters[0].cosched.decode.below_one.realised",
                                                      "a ratio only where `realised` prices 1", "0.9"),
    "a ratio below 1 of 1": (("drafters", 0, "cosched", "decode"),
                             {"realised": 1.0, "priced": 1.1, "forwards": 9, "below_one": {"realised": 1.0}},
                             "drafters[0].cosched.decode.below_one.realised", "a ratio in (0, 1)", "1.0"),
    "a decode warning with an interval": (("warnings",), [{"model": "d", "table": "cosched decode single",
                                                           "width": 1, "depth": 0, "median_s": 0.0,
                                                           "spread_pct": 0.0, "samples": 25, "ratio": 0.89,
                                                           "ratio_low": 0.8, "ratio_high": 0.95}],
                                          "warnings[0].ratio",
                                          "a ratio in (0, 1) and no interval (a decode's ratio below 1)", "0.89"),
    "a pace scatter above 1": (("drafters", 0, "cosched", "decode"),
                               {"realised": 1.2, "priced": 1.1, "forwards": 9, "pace": {"sigma": 1.5, "pairs": 10}},
                               "drafters[0].cosched.decode.pace.sigma", "a log-scale spread in [0, 1]", "1.5"),
    "a pace scatter of one decode": (("drafters", 0, "cosched", "decode"),
                                     {"realised": 1.2, "priced": 1.1, "forwards": 9, "pace": {"sigma": 0.1, "pairs": 1}},
                                     "drafters[0].cosched.decode.pace.pairs", "a count >= 2 (degrees of freedom)", "1"),
    "the target after the producer, at no width": (("drafters", 0, "cosched", "decode"),
                                                   {"realised": 1.2, "priced": 1.1, "forwards": 9, "after": {}},
                                                   "drafters[0].cosched.decode.after", "at least one width", "{}"),
    "the target after the producer, in no time": (("drafters", 0, "cosched", "decode"),
                                                  {"realised": 1.2, "priced": 1.1, "forwards": 9, "after": {
                                                      2: {"seconds": 0.0, "solo_seconds": 1.0, "forwards": 3}}},
                                                  "drafters[0].cosched.decode.after.2.seconds", "finite seconds > 0",
                                                  "0.0"),
    "the target after the producer, at width 0": (("drafters", 0, "cosched", "decode"),
                                                  {"realised": 1.2, "priced": 1.1, "forwards": 9, "after": {
                                                      0: {"seconds": 1.0, "solo_seconds": 1.0, "forwards": 3}}},
                                                  "drafters[0].cosched.decode.after", "widths >= 1", "0"),
    "negative spread": (("target", "costs", "spread", 1), [-1e-4, 1e-4], "target.costs.spread.1[0]",
                        "standard deviations in seconds: finite and >= 0", "-0.0001"),
    "negative overhead": (("overheads", "publish_s"), -1e-6, "overheads.publish_s", "seconds: finite and >= 0",
                          "-1e-06"),
    "infinite overhead": (("overheads", "align_s"), float("inf"), "overheads.align_s", "a number", "inf"),
    "no repetitions": (("target", "costs", "repetitions", 1), [0, 5], "target.costs.repetitions.1[0]",
                       "counts of timed samples: finite and >= 1", "0"),
    "a count per cell": (("target", "costs", "repetitions"), 5, "target.costs.repetitions", "a mapping", "5"),
    "negative achieved precision": (("target", "costs", "achieved_precision", 2), [0.01, -0.5],
                                    "target.costs.achieved_precision.2[1]",
                                    "relative half-widths of the median's interval: finite and >= 0", "-0.5"),
    "precision of 1": (("target", "costs", "precision"), 1.0, "target.costs.precision",
                       "a fraction of the median in (0, 1)", "1.0"),
    "a warning's precision alone": (("warnings",), [{"model": "t", "table": "CT", "width": 1, "depth": 0,
                                                     "median_s": 0.01, "spread_pct": 1.0, "samples": 30,
                                                     "precision": 0.02}],
                                    "warnings[0]", "both `precision` and `achieved_precision` or neither",
                                    "['precision']"),
}


def test_a_profile_with_its_decode_contention_round_trips_and_prices_the_target_with_it():
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"), {"realised": 1.32, "priced": 1.1, "forwards": 40})
    profile = profile_from_dict(doc, Path("p.yaml"))
    name = doc["drafters"][0]["name"]
    cosched = profile.drafters[name].cosched
    cells = replace(cosched, decode=None)
    for width in (1, max(cosched.rho_target) + 3):  # measured and filled widths alike, at any depth
        for depth in (cosched.depths[0], cosched.depths[-1] + 100):  # no class measured: the cells, calibrated
            assert cosched.ratios(width, depth)[0] == pytest.approx(cells.ratios(width, depth)[0] * 1.32 / 1.1)
    raw = float(doc["drafters"][0]["cosched"]["ratios"][1]["rho_drafter"][0])
    assert cosched.ratios(1, cosched.depths[0])[1] == raw  # the drafter's ratio stays the cells'
    again = profile_from_dict(profiles.profile_to_dict(profile), Path("p.yaml"))
    assert again.drafters[name].cosched.decode == cosched.decode


def test_a_pace_scatter_round_trips_beside_the_ratios_it_was_measured_with():
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"),
               {"realised": 1.32, "priced": 1.1, "forwards": 40, "pace": {"sigma": 0.14, "pairs": 18}})
    profile = profile_from_dict(doc, Path("p.yaml"))
    decode = profile.drafters[doc["drafters"][0]["name"]].cosched.decode
    assert (decode.pace_sigma, decode.pace_pairs) == (0.14, 18)
    assert profiles.profile_to_dict(profile)["drafters"][0]["cosched"]["decode"]["pace"] == {"sigma": 0.14,
                                                                                            "pairs": 18}


def test_the_target_after_the_producer_round_trips_and_prices_each_width_alone():
    after = {1: {"seconds": 3.0, "solo_seconds": 2.5, "forwards": 20}, 4: {"seconds": 9.0, "solo_seconds": 10.0,
                                                                          "forwards": 30}}
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"),
               {"realised": 1.32, "priced": 1.1, "forwards": 40, "after": after})
    profile = profile_from_dict(doc, Path("p.yaml"))
    cosched = profile.drafters[doc["drafters"][0]["name"]].cosched
    assert (cosched.after(1), cosched.after(4), cosched.after(3)) == (1.2, 0.9, 0.9)
    assert profiles.profile_to_dict(profile)["drafters"][0]["cosched"]["decode"]["after"] == after


PRODUCER = {"producer": {"realised": 2.1, "priced": 3.6, "forwards": 140}}


@pytest.mark.parametrize("lane, single, verify, pooled", [
    (0, "single", "verify", {}),  # the target's ratio beside the producer, per width class
    (1, "producer_single", "producer_verify", PRODUCER),  # the producer's, beside each class of target forward
])
def test_a_profile_prices_each_lanes_classes_at_their_decode_ratios_and_round_trips(lane, single, verify, pooled):
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"),
               {"realised": 2.3, "priced": 1.1, "forwards": 40, **pooled, single: {"realised": 2.6, "forwards": 30},
                verify: {"realised": 2.0, "forwards": 10}})
    profile = profile_from_dict(doc, Path("p.yaml"))
    cosched = profile.drafters[doc["drafters"][0]["name"]].cosched
    for depth in (cosched.depths[0], cosched.depths[-1] + 100):
        assert cosched.ratios(1, depth)[lane] == 2.6
        assert cosched.ratios(2, depth)[lane] == cosched.ratios(max(cosched.rho_target) + 3, depth)[lane] == 2.0
    again = profile_from_dict(profiles.profile_to_dict(profile), Path("p.yaml"))
    assert again.drafters[doc["drafters"][0]["name"]].cosched.decode == cosched.decode
    if pooled:
        del doc["drafters"][0]["cosched"]["decode"]["producer"]
        with pytest.raises(SpecbenchError, match="producer_single"):  # a class without the pooled ratio it refines
            profile_from_dict(doc, Path("p.yaml"))


def test_a_profile_prices_the_producer_at_its_decode_ratio_and_round_trips():
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"),
               {"realised": 2.3, "priced": 1.1, "forwards": 40,
                "producer": {"realised": 1.97, "priced": 3.6, "forwards": 140}})
    profile = profile_from_dict(doc, Path("p.yaml"))
    cosched = profile.drafters[doc["drafters"][0]["name"]].cosched
    assert (cosched.decode.producer, cosched.decode.producer_priced, cosched.decode.producer_forwards) == (
        1.97, 3.6, 140)
    for width in (1, max(cosched.rho_drafter) + 3):  # measured and filled widths alike, at any depth
        for depth in (cosched.depths[0], cosched.depths[-1] + 100):
            assert cosched.ratios(width, depth)[1] == 1.97
    assert (cosched.dense(3, 2)[1] == 1.97).all()
    again = profile_from_dict(profiles.profile_to_dict(profile), Path("p.yaml"))
    assert again.drafters[doc["drafters"][0]["name"]].cosched.decode == cosched.decode
    with pytest.raises(SpecbenchError) as error:
        profile_from_dict(_set(doc, ("drafters", 0, "cosched", "decode", "producer", "forwards"), 3), Path("p.yaml"))
    assert str(error.value) == ("p.yaml: key 'drafters[0].cosched.decode.producer.forwards': expected a count >= "
                                f"{CLASS_FORWARDS}, got 3")


def test_a_decode_ratio_measured_below_one_round_trips_beside_the_1_it_prices_and_its_warning():
    doc = _set(_local(), ("drafters", 0, "cosched", "decode"),
               {"realised": 1.0, "priced": 1.1, "forwards": 40, "single": {"realised": 1.0, "forwards": 25},
                "verify": {"realised": 1.3, "forwards": 15}, "below_one": {"realised": 0.97, "single": 0.89}})
    doc["warnings"] = [{"model": "d", "table": "cosched decode single", "width": 1, "depth": 0, "median_s": 0.0,
                        "spread_pct": 0.0, "samples": 25, "ratio": 0.89}]
    profile = profile_from_dict(doc, Path("p.yaml"))
    decode = profile.drafters[doc["drafters"][0]["name"]].cosched.decode
    assert decode.below_one == {"realised": 0.97, "single": 0.89} and decode.target(1) == 1.0
    again = profile_from_dict(profiles.profile_to_dict(profile), Path("p.yaml"))
    assert again.drafters[doc["drafters"][0]["name"]].cosched.decode == decode
    assert again.warnings == profile.warnings
    assert profile.warnings[0].message() == (
        "cosched decode single of d: the target's ratio its AS2D decodes realised is 0.890 over 25 forwards, "
        "below 1 (a lane faster beside the other: too few forwards, or the target-only decodes that scale its "
        "solo work ran slow); priced as 1")


def test_a_ratio_below_the_spread_floor_loads_when_its_own_interval_reaches_1_or_a_warning_names_it():
    # what a profile run writes: a noisy cell re-measured and still low, its interval spanning 1 (a
    # fixed-count cell of a sub-millisecond model), or below 1 beyond its interval and warned of
    low = _set(_local(), ("drafters", 0, "cosched", "ratios", 1, "rho_target"), [0.6, 1.1])
    name = low["drafters"][0]["name"]
    noisy = _set(low, ("drafters", 0, "cosched", "ratios", 1, "achieved_precision"), [0.7, 0.1])
    for ratios in noisy["drafters"][0]["cosched"]["ratios"].values():
        ratios.setdefault("achieved_precision", [0.1] * len(ratios["rho_target"]))
    assert profile_from_dict(noisy, Path("p.yaml")).drafters[name].cosched.rho_target[1][0] == 0.6
    tight = _set(noisy, ("drafters", 0, "cosched", "ratios", 1, "achieved_precision"), [0.6, 0.1])
    with pytest.raises(SpecbenchError, match=r"rho_target\[0\]': expected a slowdown ratio >= 0\.\d+ .*got 0\.6$"):
        profile_from_dict(tight, Path("p.yaml"))  # 0.6 x 1.6 < 1: its interval lies below 1
    depth = low["drafters"][0]["cosched"]["depths"][0]
    warned = low | {"warnings": [{"model": name, "table": "cosched rho_target", "width": 1, "depth": depth,
                                  "median_s": 0.001, "spread_pct": 3.0, "samples": 20, "ratio": 0.6,
                                  "ratio_low": 0.55, "ratio_high": 0.65}]}
    assert profile_from_dict(warned, Path("p.yaml")).drafters[name].cosched.rho_target[1][0] == 0.6
    elsewhere = low | {"warnings": [warned["warnings"][0] | {"width": 2}]}
    with pytest.raises(SpecbenchError, match="rho_target"):
        profile_from_dict(elsewhere, Path("p.yaml"))


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_cost_ratio_or_overhead_out_of_range_is_one_line_naming_file_key_value_and_range(case):
    keys, value, key, expected, got = BAD[case]
    with pytest.raises(SpecbenchError) as error:
        profile_from_dict(_set(_local(), keys, value), Path("p.yaml"))
    assert str(error.value) == f"p.yaml: key '{key}': expected {expected}, got {got}"
    assert "\n" not in str(error.value)
