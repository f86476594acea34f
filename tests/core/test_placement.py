"""Placements (docs/METHODS.md §4.1 Placement): named and explicit lanes, their identity, and profiles combined per
placement."""

from __future__ import annotations

import copy

import pytest

from specbench.errors import SpecbenchError
from specbench.schemas import profiles
from specbench.schemas.fileio import Where
from specbench.schemas.placement import Lane, device_label, device_of, pinning_problems, placement_from_dict, resolve
from specbench.world.profiling import median_profile


def test_split_gives_each_lane_its_own_cores_and_shared_gives_both_all():
    split = resolve("split", [0, 1, 2, 3, 4, 5, 6, 7], {"target": "GPUOpenCL"})
    assert split.target == Lane("GPUOpenCL", (0, 1, 2, 3), 4) and split.drafter == Lane("cpu", (4, 5, 6, 7), 4)
    shared = resolve("shared", [1, 0])
    assert shared.target == shared.drafter == Lane("cpu", (0, 1), 2)
    assert resolve("split", [0, 1, 2]).target.cpus == (0, 1)  # the target gets the larger half
    assert split.key != resolve("split", [0, 1, 2, 3, 4, 5, 6, 7]).key  # the processor is part of the identity


def test_an_explicit_placement_names_processor_cpus_and_threads():
    p = resolve("target=GPUOpenCL@4-7/1,drafter=cpu@0-1+3", range(8))
    assert p.name == "custom" and p.target == Lane("GPUOpenCL", (4, 5, 6, 7), 1)
    assert p.drafter == Lane("cpu", (0, 1, 3), 3)
    assert p.label == p.key == "custom[target=GPUOpenCL@4-7/1,drafter=cpu@0-1,3/3]"
    assert placement_from_dict(p.as_dict(), Where("p.yaml")) == p


@pytest.mark.parametrize("spec, message", [
    ("split", "needs at least 2 CPUs"),
    ("target=cpu@0", "no drafter lane"),
    ("target=cpu@0,target=cpu@0", "the target lane is given twice"),
    ("target=cpu@3-1,drafter=cpu@0", "CPU list '3-1'"),
    ("target=cpu@0/0,drafter=cpu@0", "threads 0: expected >= 1"),
    ("target=cpu@9,drafter=cpu@0", "names CPU 9, which the device does not let the runner use"),
    ("everywhere", "cannot read 'everywhere'"),
])
def test_bad_placements_are_one_clear_line(spec, message):
    cpus = [0] if spec == "split" else [0, 1]
    with pytest.raises(SpecbenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(spec, cpus)


def test_rows_name_a_device_in_its_placement():
    split = resolve("split", [0, 1])
    assert device_label("pixel8", split) == "pixel8@split" and device_of("pixel8@split") == "pixel8"


def test_a_lane_that_ran_elsewhere_is_reported():
    split = resolve("split", [0, 1])
    good = {"lanes": [{"lane": "target", "read_back": [0]}, {"lane": "drafter", "read_back": [1]}]}
    assert pinning_problems(split, good) == []
    bad = {"lanes": [{"lane": "target", "read_back": [0, 1]}]}
    assert pinning_problems(split, bad) == ["the target lane asked for CPUs 0 and runs on [0, 1]"]


def _profile_doc(ct1: float, rho: float, startup: float) -> dict:
    return {"kind": "specbench.profile", "schema_version": profiles.VERSION, "device": {"name": "local"},
            "placement": resolve("split", [0, 1]).as_dict(),
            "snapshot": {"before": {"t": ct1}, "after": {"t": ct1}},
            "target": {"model": {"name": "t"}, "costs": {"depths": [0], "seconds": {1: [ct1]}, "repetitions": {1: [5]}}},
            "drafters": [{"name": "d", "model": {"name": "d"}, "costs": {"depths": [0], "seconds": {1: [ct1 / 2]}},
                          "cosched": {"depths": [0], "ratios": {2: {"rho_target": [rho], "rho_drafter": [rho]}}}}],
            "overheads": {"producer_startup_s": startup, "publish_s": 0.0, "align_s": 0.0}}


def test_profiles_of_one_placement_combine_into_their_medians():
    docs = [_profile_doc(0.012, 1.05, 0.003), _profile_doc(0.011, 1.10, 0.002), _profile_doc(0.013, 1.02, 0.004)]
    combined = median_profile(docs)
    assert combined["target"]["costs"]["seconds"] == {1: [0.012]}
    assert combined["drafters"][0]["costs"]["seconds"] == {1: [0.006]}
    assert combined["drafters"][0]["cosched"]["ratios"][2]["rho_target"] == [1.05]
    assert combined["overheads"]["producer_startup_s"] == 0.003 and combined["target"]["costs"]["repetitions"] == {1: [5]}
    assert combined["snapshot"] == {"before": {"t": 0.012}, "after": {"t": 0.013}}
    other = copy.deepcopy(docs[1])
    other["placement"] = resolve("shared", [0, 1]).as_dict()
    with pytest.raises(SpecbenchError, match="differ in 'placement'"):
        median_profile([docs[0], other])
