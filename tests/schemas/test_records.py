"""Every record kind reads and writes itself through the one field-driven parser (fileio.from_dict /
to_dict): a record survives the trip through JSON unchanged, and an unknown key, a value of another
type and a value out of its range are each refused in the one line they were refused in before."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest

from specbench.core.divergence import Explanation
from specbench.core.methods.configs import As2dConfig, SdConfig, row_fields
from specbench.errors import SpecbenchError
from specbench.schemas import (
    budgets,
    divergences,
    environment,
    fileio,
    placement,
    profiles,
    results,
    timeline,
    traces,
    windows,
)
from specbench.schemas.divergences import Divergence, Margins
from specbench.schemas.environment import (
    DeviceEnvironment,
    Environment,
    LoadedModel,
    Resume,
    RunnerBuild,
    environment_from_dict,
    environment_to_dict,
)
from specbench.schemas.fileio import Where, field_plans, from_dict, to_dict
from specbench.schemas.placement import Lane, Placement, placement_from_dict, resolve
from specbench.schemas.profiles import (
    DeclaredCost,
    DeviceInfo,
    LanePinning,
    ModelId,
    Overheads,
    RunnerRecord,
    Snapshots,
    StabilityWarning,
    profile_from_dict,
)
from specbench.schemas.results import (
    EnergyRecord,
    ProfileInput,
    Repeats,
    ResultsManifest,
    TraceInput,
    WindowResult,
    WindowsInput,
    manifest_from_dict,
    manifest_to_dict,
)
from specbench.schemas.timeline import TimelineRecord
from specbench.schemas.traces import LookupDrafts, ModelRef, Shard, TraceKey, load_trace_file
from specbench.schemas.validation import PairedRun, decode_series, series_pass
from specbench.schemas.windows import InputView, Window, load_windows, make_text_window, window_to_dict

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "device_profiles" / "local-shared.yaml"

RUNNER = RunnerBuild("0.1.0", 1, "ab" * 32, "c0ffee", ("-DGGML_NATIVE=OFF",), "CPU : AVX2 = 1 | ")
MODEL = LoadedModel("target", "t", "cd" * 32, "llama 135M F16", 134_515_008, 269_030_016, threads=2)
DEVICE = DeviceEnvironment("local", "local", "host", None, 8, "performance", {"before": {"temp_c": 41.5}},
                           {"abi": "x86_64"})
ENV = Environment("0.1.0", ("specbench", "run"), "2026-12-01T13:00:00.000Z", "2026-12-01T13:05:00.000Z",
                  (Resume("0.1.0", ("specbench", "run", "--resume"), "2026-12-01T13:01:00.000Z"),), RUNNER,
                  (MODEL,), DEVICE)
SPLIT = resolve("split", [0, 1, 2, 3])
WARNING = StabilityWarning("t", "CT", 1, 0, 0.01, 12.5, 30, precision=0.02, achieved_precision=0.031)
RATIO_WARNING = StabilityWarning("small", "cosched rho_target", 4, 256, 0.02, 3.0, 12, ratio=0.9, ratio_low=0.85,
                                 ratio_high=0.95)
PROFILE = ProfileInput("p.yaml", "0" * 64, "local@split", None, SPLIT, (WARNING, RATIO_WARNING), ENV,
                       {"small": "0.25 x the target's CT(n, depth); source: one block"})
WINDOWS = WindowsInput("windows.jsonl", "d" * 64, 4)
TRACE = TraceInput("traces/small.jsonl", ModelId("t", "a" * 64), ModelId("small", "b" * 64))
ENERGY = EnergyRecord(100, 2.0, None, "/sys/class/power_supply/battery/current_now",
                      "/sys/class/power_supply/battery/voltage_now", "/sys/class/power_supply/battery/status", None,
                      "uA,uV,discharging_negative", True, "Discharging", 120, 0.5, 20, 1_000, 2_000_000)
ROW = WindowResult(device="local@split", **row_fields(SdConfig(width=5, p_min=0.2, drafter="small")),
                   window_id="w1", window_sha256="s" * 64, dataset="d", split="test", tokens=10, decode_s=1.5,
                   target_forwards=4, proposed=12, accepted=6, multi_token_forwards=3, drafter_forwards=12, d_s=0.3,
                   v_s=1.0, o_s=0.0, h_s=0.2, extrapolated=False, lossless=True, source="native",
                   reached_at=(4, 3), accepted_at=(4, 2), energy_j=1.25, energy_above_idle_j=-0.5,
                   energy_samples=3, samples_s=[1.5, 1.6], category="coding", drafter_sha256="b" * 64,
                   decisions_match=True)
TIMELINE = TimelineRecord("local@split", "sd[W=5]", 0, "realtime", True, 2, "w1", "s" * 64, 0.5, 0.75, 1.5, 10,
                          0.75, True, None, {"thermal_zone0:cpu": 41.5}, {"policy0": 1_800_000},
                          {"policy0": 2_000_000}, 1.75, "2026-12-01T13:00:02Z")
MARGINS = Margins((5, 9), 0.25, (9, 5), 0.1, 0.3, -0.2, 0.05)
REPLAY = ResultsManifest("replay", ENV, WINDOWS, ("target", "sd[W=5,drafter=small]"), {"small": TRACE}, (PROFILE,),
                         "linear-in-depth", True)
NATIVE = ResultsManifest("native", ENV, WINDOWS, ("target",), device="local@split", target=ModelId("t", "a" * 64),
                         drafters=(ModelId("small", "b" * 64),), templates={"target": "model", "small": "chatml"},
                         placement=SPLIT, placement_profile=ProfileInput("p.yaml", "0" * 64), reference="trace",
                         repeats=Repeats(3, 1), energy=ENERGY)
TEXT_WINDOW = make_text_window("w1", "hello", "Repeat.", 8, "d", "dev", reference="hello", category="coding")

EXAMPLES = [
    RUNNER, MODEL, DEVICE, ENV.resumes[0], ENV,
    ROW, WINDOWS, TRACE, PROFILE, ProfileInput("p.yaml", "0" * 64), Repeats(3, 1), ENERGY, TIMELINE,
    REPLAY, NATIVE,
    DeclaredCost("one decoder block + LM head", 0.25), DeclaredCost("another harness"), ModelId("t"),
    ModelId("t", "a" * 64), Overheads(0.01, 0.001, 0.002, 0.0005), Overheads(),
    DeviceInfo("pixel", {"kind": "adb", "cores": 8}), Snapshots({"temp_c": 30.0}, {"temp_c": 41.0}),
    LanePinning((0, 1), (0, 1), 2), RunnerRecord("ab" * 32, "0.1.0", 1, None, ("-DX=1",), "/bin/runner"),
    RunnerRecord("ab" * 32), WARNING, RATIO_WARNING,
    Lane("cpu", (0, 1), 2), SPLIT, placement.UNRECORDED_PLACEMENT,
    ModelRef("t", "a" * 64, 49152), TraceKey("ab", "cd", 4, 16, ("specasr[k_max=4,tau=0.25]",), 2),
    TraceKey("ab", "cd", 4, 16), Shard(2, 4), LookupDrafts("pld", 3),
    InputView("audio", audio_path="a.wav", offset_s=1.5, duration_s=2.0, conversion={"rate": 44100}),
    TEXT_WINDOW,
    MARGINS, Divergence("w1", "sd[W=5]", 3, 5, 9, 1, "local@split", ((5, 2), (1, 1)), 5, 2, MARGINS,
                        Explanation.NEAR_TIE),
    Divergence("w1", "target", 7, None, 4), As2dConfig(3, "small", 4, 0.5, "positional", 2), As2dConfig(),
]


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: type(r).__name__)
def test_a_record_survives_the_trip_through_json(record):
    doc = json.loads(json.dumps(to_dict(record)))
    assert from_dict(type(record), doc, Where("r.json")) == record
    assert to_dict(from_dict(type(record), doc, Where("r.json"))) == doc


def _records_in(tp: object) -> set[type]:
    """The dataclasses `tp` names, itself and within lists, mappings and nulls."""
    if dataclasses.is_dataclass(tp):
        return {tp}  # type: ignore[arg-type]
    return set().union(*(_records_in(arg) for arg in typing.get_args(tp)))


def test_every_record_kind_a_loader_reads_has_an_example():
    """The classes the schemas' loaders hand to from_dict, and every record within them, each round-trip above."""
    called = set()
    for module in (budgets, divergences, environment, placement, profiles, results, timeline, traces, windows):
        source = Path(module.__file__).read_text()
        called |= {getattr(module, name) for name in re.findall(r"\bfrom_dict\(([A-Z]\w*),", source)}
    reached, todo = set(), list(called)
    while todo:
        cls = todo.pop()
        if cls not in reached:
            reached.add(cls)
            todo += [c for t in typing.get_type_hints(cls).values() for c in _records_in(t)]
    assert {Lane, Resume, Margins, EnergyRecord, WindowResult, TimelineRecord} <= reached
    assert reached <= {type(r) for r in EXAMPLES}, reached - {type(r) for r in EXAMPLES}


def test_each_class_is_planned_once_and_read_without_its_annotations(monkeypatch):
    doc = to_dict(ENV)
    environment_from_dict(doc, Where("m.json"))
    manifest_from_dict(manifest_to_dict(REPLAY), Path("m.json"))
    assert field_plans(Environment) is field_plans(Environment)

    def no_hints(*args, **kwargs):
        raise AssertionError("typing.get_type_hints called again for a planned class")

    monkeypatch.setattr(typing, "get_type_hints", no_hints)
    assert environment_from_dict(doc, Where("m.json")) == ENV
    assert manifest_from_dict(manifest_to_dict(REPLAY), Path("m.json")) == REPLAY


def test_a_key_ruled_optional_is_left_out_at_its_default_and_read_back_as_it():
    assert to_dict(ModelId("t")) == {"name": "t"}
    assert to_dict(LoadedModel("target", "t", "cd", "d", 1, 1)).keys() == {"role", "name", "sha256", "desc",
                                                                            "n_params", "size_bytes"}
    assert to_dict(Placement("unrecorded")) == {"name": "unrecorded"}
    assert to_dict(DeviceInfo("pixel", {"kind": "adb"})) == {"name": "pixel", "kind": "adb"}  # the rest, flat
    assert window_to_dict(TEXT_WINDOW)["input"] == {"kind": "text", "text": "hello"}  # a text input's keys only


# --- the one line each refusal gives ---------------------------------------------------------------

KNOWN_ENV = "['argv', 'device', 'finished', 'models', 'resumes', 'runner', 'specbench_version', 'started']"
ENV_DOC = environment_to_dict(ENV)


def _env(change: dict) -> None:
    environment_from_dict(ENV_DOC | change, Where("m.json", "environment"))


def _manifest(key: str, change: dict, drop: str = "") -> None:
    doc = manifest_to_dict(NATIVE)
    doc[key] = {k: v for k, v in (doc[key] | change).items() if k != drop}
    manifest_from_dict(doc, Path("m.json"))


def _profile(keys: tuple, value) -> None:
    import yaml

    doc = yaml.safe_load(LOCAL.read_text())
    here = doc
    for key in keys[:-1]:
        here = here[key]
    here[keys[-1]] = value
    profile_from_dict(doc, Path("p.yaml"))


def _timeline(change: dict) -> None:
    timeline._timeline_record(to_dict(TIMELINE) | change, Where("t.jsonl", "line 3"))


def _trace_header(tmp_path: Path, key: dict) -> None:
    header = {"kind": traces.KIND, "schema_version": traces.VERSION, "target": to_dict(ModelRef("t", "a", 100)),
              "drafter": to_dict(ModelRef("d", "b", 100)), "key": to_dict(TraceKey("ab", "cd", 4, 16)) | key}
    (tmp_path / "x.jsonl").write_text(json.dumps(header) + "\n")
    load_trace_file(tmp_path / "x.jsonl")


def _window(tmp_path: Path, change: dict) -> None:
    line = window_to_dict(make_text_window("w1", "hello", "Repeat.", 8, "d", "dev")) | change
    (tmp_path / "w.jsonl").write_text(json.dumps({"kind": windows.KIND, "schema_version": windows.VERSION}) + "\n"
                                      + json.dumps(line) + "\n")
    load_windows(tmp_path / "w.jsonl")


REFUSED = {
    "an unknown key": (lambda tmp: _env({"colour": "blue"}),
                       f"m.json: key 'environment.colour': expected one of the known keys {KNOWN_ENV} (unknown key)"),
    "an unknown key of a nested record": (
        lambda tmp: _env({"runner": environment.runner_dict(RUNNER) | {"cuda": True}}),
        "m.json: key 'environment.runner.cuda': expected one of the known keys ['flags', 'llama_cpp_commit', "
        "'protocol', 'sha256', 'system_info', 'version'] (unknown key)"),
    "a missing key": (lambda tmp: _env({"runner": {"sha256": "ab"}}),
                      "m.json: key 'environment.runner.flags': expected a list (missing)"),
    "a count of another type": (lambda tmp: _env({"models": [to_dict(MODEL) | {"n_params": "many"}]}),
                                "m.json: key 'environment.models[0].n_params': expected an integer, got 'many'"),
    "a list of another type": (lambda tmp: _env({"argv": "specbench run"}),
                               "m.json: key 'environment.argv': expected a list of strings (the command line), got "
                               "'specbench run'"),
    "a count out of range": (lambda tmp: _env({"models": [to_dict(MODEL) | {"n_params": 0}]}),
                             "m.json: key 'environment.models[0].n_params': expected an integer > 0 (as llama.cpp "
                             "reports it), got 0"),
    "a value outside its closed set": (lambda tmp: _env({"models": [to_dict(MODEL) | {"role": "oracle"}]}),
                                       "m.json: key 'environment.models[0].role': expected 'target' or 'drafter', "
                                       "got 'oracle'"),
    "a timestamp not at UTC": (lambda tmp: _env({"started": "2026-12-01T13:00:00+02:00"}),
                               "m.json: key 'environment.started': expected a UTC ISO-8601 timestamp such as "
                               "2026-12-01T13:02:11.482Z, got '2026-12-01T13:00:00+02:00'"),
    "a negative window count": (lambda tmp: _manifest("windows", {"count": -1}),
                                "m.json: key 'windows.count': expected a count >= 0, got -1"),
    "an energy interval of 0": (lambda tmp: _manifest("energy", {"interval_ms": 0}),
                                "m.json: key 'energy.interval_ms': expected milliseconds >= 1, got 0"),
    "an energy record without a key": (
        lambda tmp: _manifest("energy", {}, drop="samples"),
        "m.json: key 'energy.samples': expected an integer (missing)"),
    "a template of a model not run": (lambda tmp: _manifest("templates", {"large": "chatml"}),
                                      "m.json: key 'templates': expected 'target' or a drafter's name -> a template "
                                      "name (strings), got {'target': 'model', 'small': 'chatml', 'large': 'chatml'}"),
    "an overhead of another type": (lambda tmp: _profile(("overheads", "publish_s"), "x"),
                                    "p.yaml: key 'overheads.publish_s': expected a number, got 'x'"),
    "an infinite overhead": (lambda tmp: _profile(("overheads", "align_s"), float("inf")),
                             "p.yaml: key 'overheads.align_s': expected a number, got inf"),
    "a negative overhead": (lambda tmp: _profile(("overheads", "publish_s"), -1e-6),
                            "p.yaml: key 'overheads.publish_s': expected seconds: finite and >= 0, got -1e-06"),
    "a lane of no threads": (lambda tmp: _profile(("placement", "target", "threads"), 0),
                             "p.yaml: key 'placement.target.threads': expected an integer >= 1, got 0"),
    "a lane of no CPUs": (lambda tmp: _profile(("placement", "target", "cpus"), []),
                          "p.yaml: key 'placement.target.cpus': expected a non-empty list of CPU numbers, got []"),
    "a placement without lanes": (lambda tmp: _profile(("placement",), {"name": "split"}),
                                  "p.yaml: key 'placement.target': expected a lane {processor, cpus, threads}"),
    "a stream step below 0": (lambda tmp: _timeline({"stream": -1}),
                              "t.jsonl:3: stream = -1, expected an integer >= 0"),
    "a pace outside its set": (lambda tmp: _timeline({"pace": "burst"}),
                               "t.jsonl: key 'line 3.pace': expected 'realtime' or 'back-to-back', got 'burst'"),
    "a frequency of another type": (lambda tmp: _timeline({"cur_freq_khz": {"policy0": 1.5}}),
                                    "t.jsonl: key 'line 3.cur_freq_khz': expected a mapping of names to numbers, "
                                    "got {'policy0': 1.5}"),
    "a trace key k_max of 0": (lambda tmp: _trace_header(tmp, {"k_max": 0}),
                               "x.jsonl:1: key.k_max = 0, expected an integer >= 1"),
    "a window cap of 0": (lambda tmp: _window(tmp, {"cap": 0}), "w.jsonl:2: cap = 0, expected an integer >= 1 "
                                                                 "(max_new_tokens)"),
    "a template not built in": (lambda tmp: _window(tmp, {"template": "nosuch"}),
                                "w.jsonl:2: template = 'nosuch', expected 'model' or a llama.cpp built-in chat "
                                "template (chatml, gemma, llama3, ...)"),
    "a split outside its enum": (lambda tmp: _window(tmp, {"split": "train"}),
                                 "w.jsonl: key 'line 2.split': expected 'dev' or 'test', got 'train'"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_bad_value_is_one_line_naming_file_key_value_and_what_was_expected(tmp_path, case):
    load, message = REFUSED[case]
    with pytest.raises(SpecbenchError) as error:
        load(tmp_path)
    text = str(error.value)
    assert text.removeprefix(f"{tmp_path}/") == message and "\n" not in text


def test_placement_reads_the_lanes_it_writes():
    assert placement_from_dict(SPLIT.as_dict(), Where("p.yaml")) == SPLIT
    with pytest.raises(SpecbenchError, match="no lane in the unrecorded placement"):
        placement_from_dict({"name": "unrecorded", "target": to_dict(SPLIT.target)}, Where("p.yaml"))


def test_a_field_plan_says_what_a_missing_key_lacks():
    plans = {p.name: p for p in field_plans(Environment)}
    assert plans["runner"].missing == "a mapping or null (missing)" and not plans["runner"].required
    assert plans["argv"].required and plans["argv"].missing == "a list (missing)"
    assert fileio.record_keys(Window) == windows._WINDOW_KEYS


def test_a_decode_pass_series_names_its_run_and_repeat_and_others_name_none():
    assert decode_series("gemma3", PairedRun.B, 1) == "decode:gemma3 b1"
    assert series_pass(decode_series("tiny.en", PairedRun.A, 10)) == (PairedRun.A, 10)
    assert series_pass("refresh:gemma3") is None
    assert series_pass("decode:gemma3") is None  # one job for both runs, before passes
