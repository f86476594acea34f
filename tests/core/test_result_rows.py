"""Result rows carry their configuration as typed fields; the label is derived from them,
files of another format version are refused, every count, time and probability is range-checked,
and the terminal tells configurations apart."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings

from specbench.cli import main
from specbench.core.methods.configs import (
    CONFIG_COLUMNS,
    SdConfig,
    SpecAsrConfig,
    TargetConfig,
    config_of,
    parse_method_specs,
    row_fields,
)
from specbench.errors import SpecbenchError
from specbench.schemas.results import ROW_FIELDS, VERSION, ResultsDir, WindowResult
from tests.helpers import results_manifest
from tests.strategies import method_configs as configs


@settings(max_examples=200, deadline=None)
@given(configs)
def test_the_label_is_derived_from_the_fields_of_every_method(config):
    fields = row_fields(config)
    assert config_of(fields) == config and row_fields(config_of(fields))["config"] == config.label
    assert fields["config"] == config.label and set(fields) == {"method", "config", *CONFIG_COLUMNS}
    # a parameter the method lacks is None, every one it has is its own value
    own = {f.name for f in dataclasses.fields(config)} | ({"tau_threshold"} if isinstance(config, SpecAsrConfig)
                                                           else set())
    assert all(fields[c] is None for c in CONFIG_COLUMNS if c not in own)


def test_the_rows_hold_one_column_per_configuration_parameter():
    assert ROW_FIELDS[:3] == ("device", "method", "config")
    assert ROW_FIELDS[3:3 + len(CONFIG_COLUMNS)] == CONFIG_COLUMNS


def _row(config, window="w1", decode_s=1.0, device="A"):
    return WindowResult(device=device, **row_fields(config), window_id=window, window_sha256="s" * 64, dataset="d",
                        split="test", tokens=10, decode_s=decode_s, target_forwards=5, proposed=5, accepted=3,
                        multi_token_forwards=2, drafter_forwards=4, d_s=0.0, v_s=decode_s, o_s=0.0, h_s=0.0,
                        extrapolated=False, lossless=True)


def _results(directory, rows):
    results = ResultsDir(directory)
    results.open(results_manifest(mode="replay"), resume=False)
    results.append(rows)
    return results


SPECS = ["target", "sd:W=5|8,p_min=0.2,drafter=small", "specasr:k_max=4,tau=0.25", "as2d:B=3,batch=4,H=2,align=positional",
         "as2d:B=7,conf_stop=0.5,drafter=large"]


def test_rows_of_every_method_round_trip_through_the_file(tmp_path):
    rows = [_row(c) for c in parse_method_specs(SPECS)]
    assert _results(tmp_path / "r", rows).rows() == rows


def test_results_of_the_previous_version_are_refused_naming_both_versions(tmp_path):
    results = _results(tmp_path / "v2", [_row(TargetConfig())])
    manifest = json.loads(results.manifest_path.read_text())
    results.manifest_path.write_text(json.dumps({**manifest, "schema_version": VERSION - 1}))
    expected = (f"{results.manifest_path}: schema_version {VERSION - 1}, this specbench reads {VERSION} "
                "(hint: write the file again with this specbench)")
    for attempt in (results.frame, lambda: results.open(results_manifest(mode="replay"), resume=True)):
        with pytest.raises(SpecbenchError) as error:
            attempt()
        assert str(error.value) == expected


@pytest.mark.parametrize("key, value, expected", [
    ("tokens", -1, "a count >= 0"),
    ("target_forwards", -3, "a count >= 0"),
    ("decode_s", -0.5, "seconds in [0, 86400]"),
    ("v_s", float("inf"), "seconds in [0, 86400]"),
    ("decode_s", 1e308, "seconds in [0, 86400]"),
    ("decode_s", 0.0, "seconds > 0 (the row committed tokens)"),
    ("p_min", 1.5, "a probability in [0, 1]"),
])
def test_a_count_time_or_probability_out_of_range_is_named_with_its_line(tmp_path, key, value, expected):
    results = _results(tmp_path / "r", [_row(TargetConfig()), _row(SdConfig(width=5, p_min=0.2), "w2")])
    docs = [json.loads(line) for line in results.rows_path.read_text().splitlines()]
    docs[1][key] = value
    results.rows_path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(SpecbenchError) as error:
        results.frame()
    assert str(error.value) == f"{results.rows_path}: key 'line 2.{key}': expected {expected}, got {value!r}"


def test_a_row_whose_label_disagrees_with_its_fields_is_refused(tmp_path):
    results = _results(tmp_path / "r", [_row(TargetConfig()), _row(SdConfig(width=5), "w2")])
    docs = [json.loads(line) for line in results.rows_path.read_text().splitlines()]
    docs[1]["width"] = 6
    results.rows_path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(SpecbenchError) as error:
        results.frame()
    assert str(error.value) == (f"{results.rows_path}: key 'row 2.config': expected 'sd[W=6]', as sd with the row's "
                                "other fields gives, got 'sd[W=5]'")
    docs[1].update(width=5, budget=3)
    results.rows_path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    with pytest.raises(SpecbenchError, match=r"key 'row 2.budget': expected None, as sd .* got 3"):
        results.frame()


def test_unknown_versions_are_refused_in_one_line(tmp_path):
    results = _results(tmp_path / "r", [_row(TargetConfig())])
    manifest = json.loads(results.manifest_path.read_text())
    results.manifest_path.write_text(json.dumps({**manifest, "schema_version": VERSION + 1}))
    output = CliRunner().invoke(main, ["report", str(results.directory)]).output
    assert output.splitlines() == [f"Error: {results.manifest_path}: schema_version {VERSION + 1}, this specbench "
                                   f"reads {VERSION} (hint: write the file again with this specbench)"]


def test_an_80_column_pooled_table_tells_configurations_apart(tmp_path):
    configs = [TargetConfig(), SdConfig(width=5, drafter="smollm2"), SdConfig(width=5, drafter="gemma3"),
               SdConfig(width=6, drafter="smollm2")]
    rows = [_row(c, w, decode_s=1.0 + i / 10) for i, c in enumerate(configs) for w in ("w1", "w2")]
    result = CliRunner().invoke(main, ["report", str(_results(tmp_path / "r", rows).directory), "--detail"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    pooled = result.output.split("Pooled decode throughput")[1].split("Windows faster / slower")[0].splitlines()
    assert max(map(len, pooled)) <= 80 and "…" not in result.output
    assert "on every row: device A" in result.output  # the one device is named once, not in a column
    header = next(line for line in pooled if "method" in line.split())
    assert header.split()[-3:] == ["method", "drafter", "W/B"]
    # method, drafter and W/B tell the configurations apart, one line each: the label column is left out
    assert [line.split()[-3:] for line in pooled if " sd " in line] == [["sd", "smollm2", "5"], ["sd", "gemma3", "5"],
                                                                         ["sd", "smollm2", "6"]]
    assert "config left out: method, drafter, W/B name each row" in " ".join(" ".join(pooled).split())
    assert not any(config.label in line for config in configs[1:] for line in pooled)
