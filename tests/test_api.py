"""`specbench.load_rows`: the rows of several runs in one frame, as the README shows it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

import specbench
from specbench.cli import main
from specbench.errors import SpecbenchError
from specbench.schemas.results import load_results
from tests.helpers import write_study


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two replay runs of the same windows on two device profiles, made with `specbench run`."""
    root = tmp_path_factory.mktemp("runs")
    _, windows, traces, profiles = write_study(root, n_windows=6, n_devices=2)
    runs = []
    for name, profile, methods in (("a", profiles[0], "target,sd"), ("b", profiles[1], "target,as2d")):
        out = root / name
        result = CliRunner().invoke(main, ["run", str(windows), "--traces", str(traces), "--profile", str(profile),
                                           "--drafter", "small", "--methods", methods, "--out", str(out)])
        assert result.exit_code == 0, result.output
        runs.append(out)
    return runs


def test_two_runs_load_into_one_frame_with_the_run_named(two_runs):
    a, b = two_runs
    frame = specbench.load_rows([str(a), b])
    own = {str(a): load_results(a)[1], str(b): load_results(b)[1]}
    assert len(frame) == len(own[str(a)]) + len(own[str(b)]) == 6 * (1 + 4) + 6 * (1 + 1)
    assert list(frame.columns) == ["run", *own[str(a)].columns]
    assert list(frame["run"].unique()) == [str(a), str(b)]
    for run, rows in own.items():
        mine = frame[frame["run"] == run].drop(columns="run").reset_index(drop=True)
        assert mine.to_dict("records") == rows.to_dict("records")  # every value as the run's own rows
    # each run's device and source, one device per profile
    assert frame.groupby("run")["device"].nunique().tolist() == [1, 1]
    assert frame["device"].nunique() == 2 and set(frame["source"]) == {"replay"}
    assert specbench.load_rows(a).equals(frame[frame["run"] == str(a)].reset_index(drop=True))


def test_a_directory_that_holds_no_run_is_one_error(tmp_path):
    with pytest.raises(SpecbenchError, match=f"{tmp_path}: not a results directory"):
        specbench.load_rows([tmp_path])
    with pytest.raises(SpecbenchError, match="no results directories given"):
        specbench.load_rows([])


def test_importing_specbench_loads_no_pandas():
    code = "import sys, specbench; assert 'pandas' not in sys.modules and callable(specbench.load_rows)"
    subprocess.run([sys.executable, "-c", code], check=True)
