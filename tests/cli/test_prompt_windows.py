"""`specbench windows --layout prompts`: JSON lines and CSV prompt files into text windows, their
categories through replay rows into the per-category table and the one-screen summary, and bad inputs."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pandas as pd
import pytest
from click.testing import CliRunner

from specbench.cli import main
from specbench.core import stats
from specbench.schemas.results import load_results
from specbench.schemas.windows import load_windows, save_windows, split_of, text_window_sha256
from tests.helpers import write_study

# Spec-Bench's question.jsonl: question_id, category, turns; math questions carry a reference per turn
QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post about Hawaii.",
                                                         "Rewrite it starting every sentence with A."]},
    {"question_id": 111, "category": "math", "turns": ["What is 3 + 4?", "And 3 x 4?"], "reference": ["7", "12"]},
    {"question_id": 131, "category": "writing", "turns": ["Write a haiku about rain."]},
]


def invoke(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_question_file_becomes_windows_whose_hashes_load_back(tmp_path):
    source = write_jsonl(tmp_path / "question.jsonl", QUESTIONS)
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", source, "--cap", 128, "--out", out)  # auto: a JSONL of turns is prompts
    assert code == 0, output
    assert "3 windows" in output and "2 categories: math, writing" in output
    windows = load_windows(out)  # the loader checks every text window's hash against its content
    assert [w.window_id for w in windows] == ["81", "111", "131"]
    assert [w.category for w in windows] == ["writing", "math", "writing"]
    first = windows[0]
    assert first.input.text == QUESTIONS[0]["turns"][0] and first.instruction == "" and first.cap == 128
    assert first.window_sha256 == text_window_sha256(QUESTIONS[0]["turns"][0], "", "model", 128)
    assert windows[1].reference == "7" and first.reference is None
    assert first.dataset == "question" and first.split == split_of("81", 0, 0.2)


def test_every_turn_as_a_window_of_its_own(tmp_path):
    source = write_jsonl(tmp_path / "question.jsonl", QUESTIONS)
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", source, "--layout", "prompts", "--turns", "all", "--dev-fraction", 0.5,
                          "--instruction", "Answer briefly.", "--out", out)
    assert code == 0, output
    windows = load_windows(out)
    assert [w.window_id for w in windows] == ["81-turn1", "81-turn2", "111-turn1", "111-turn2", "131-turn1"]
    assert [w.input.text for w in windows[:2]] == QUESTIONS[0]["turns"]
    assert [w.reference for w in windows[2:4]] == ["7", "12"]
    assert all(w.instruction == "Answer briefly." for w in windows)
    assert windows[1].window_sha256 == text_window_sha256(QUESTIONS[0]["turns"][1], "Answer briefly.", "model", 448)
    # the turns of one question share its split (a seeded hash of the question's id)
    assert windows[0].split == windows[1].split == split_of("81", 0, 0.5)
    assert windows[2].split == windows[3].split == split_of("111", 0, 0.5)


def test_a_csv_with_the_same_columns_gives_the_same_windows(tmp_path):
    rows = [{"id": "a", "category": "qa", "text": "Who wrote Hamlet?", "reference": "Shakespeare",
             "instruction": ""},
            {"id": "b", "category": "chat", "text": "Hello, how are you?", "reference": "", "instruction": "Be kind."}]
    with (tmp_path / "prompts.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_jsonl(tmp_path / "prompts.jsonl", [{k: v for k, v in r.items() if v} for r in rows])
    for name in ("prompts.csv", "prompts.jsonl"):
        code, output = invoke("windows", tmp_path / name, "--layout", "prompts", "--dataset", "p",
                              "--out", tmp_path / f"{name}.windows")
        assert code == 0, output
    from_csv, from_jsonl = (load_windows(tmp_path / f"{n}.windows") for n in ("prompts.csv", "prompts.jsonl"))
    assert from_csv == from_jsonl
    assert [(w.window_id, w.category, w.reference, w.instruction) for w in from_csv] == [
        ("a", "qa", "Shakespeare", ""), ("b", "chat", None, "Be kind.")]


@pytest.mark.parametrize("name, content, message", [
    ("notext.jsonl", '{"question_id": 1, "category": "math"}\n',
     "notext.jsonl: line 1: no text (expected a non-empty 'text' string or 'turns' list)"),
    ("emptyturn.jsonl", '{"id": "x", "turns": ["Hi", "  "]}\n',
     "emptyturn.jsonl: line 1: field 'turns[1]' = \"  \", expected a non-empty string"),
    ("nocolumn.csv", "id,prompt,category\n1,Hello,chat\n",
     "nocolumn.csv: no 'text' or 'turns' column (columns: id, prompt, category) (hint: name the column of the "
     "prompts 'text')"),
    ("emptycell.csv", "id,text\n1,Hello\n2,\n",
     "emptycell.csv: line 3: no text (expected a non-empty 'text' string or 'turns' list)"),
    ("twice.jsonl", '{"id": "q", "text": "a"}\n{"id": "q", "text": "b"}\n',
     "twice.jsonl: line 2: id 'q' appears twice (first at line 1)"),
])
def test_a_bad_prompt_file_is_one_line_and_writes_nothing(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    out = tmp_path / "w.jsonl"
    code, output = invoke("windows", tmp_path / name, "--layout", "prompts", "--out", out)
    assert code == 1 and output.splitlines() == [f"Error: {tmp_path / name}".rpartition(name)[0] + message]
    assert not out.exists()


def test_an_audio_option_with_a_prompt_file_is_refused(tmp_path):
    source = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)
    code, output = invoke("windows", source, "--max-seconds", 5, "--out", tmp_path / "w.jsonl")
    assert code == 1 and output.splitlines() == [
        "Error: --max-seconds applies to the audio layouts (nemo, librispeech, kaldi, hf), not prompts"]
    code, output = invoke("windows", source, "--audio-column", "a", "--out", tmp_path / "w.jsonl")
    assert code == 1 and output.splitlines() == ["Error: --audio-column applies to --layout hf only, not prompts"]
    assert not (tmp_path / "w.jsonl").exists()


@pytest.fixture(scope="module")
def categorized(tmp_path_factory):
    """A replay of a small synthetic study whose windows carry categories (not hashed: the traces still match)."""
    root = tmp_path_factory.mktemp("categories")
    _, windows, traces, profiles = write_study(root, n_windows=8, n_devices=1)
    save_windows(windows, [replace(w, category="coding" if i % 2 else "math")
                           for i, w in enumerate(load_windows(windows))])
    code, output = invoke("run", windows, "--traces", traces, "--profile", profiles[0], "--drafter", "small",
                          "--methods", "target,sd:W=5,as2d:B=7", "--out", root / "res")
    assert code == 0, output
    return root / "res"


def test_categories_reach_every_row_and_the_per_category_table(categorized):
    _, rows = load_results(categorized)
    by_window = rows.groupby("window_id")["category"].unique()
    assert set(rows["category"]) == {"coding", "math"} and all(len(c) == 1 for c in by_window)
    code, output = invoke("report", categorized, "--format", "jsonl")
    assert code == 0, output
    records = [json.loads(line) for line in output.splitlines()]
    table = {r["config"]: r for r in records if r["title"] == "Speedup per category"}
    assert set(table) == {"target", "sd[W=5,drafter=small]", "as2d[B=7,drafter=small]"}

    def pooled(config, category=None):
        part = rows[(rows["config"] == config) & ((rows["category"] == category) if category else True)]
        return part["tokens"].sum() / part["decode_s"].sum()

    as2d = table["as2d[B=7,drafter=small]"]
    for category in ("coding", "math"):
        assert as2d[category] == pytest.approx(pooled("as2d[B=7,drafter=small]", category) /
                                               pooled("target", category))
        # the interval is the pooled table's bootstrap on the category's windows
        mine = rows[rows["category"] == category]
        a, t = (mine[mine["config"] == c].set_index("window_id").sort_index() for c in ("as2d[B=7,drafter=small]",
                                                                                         "target"))
        interval = stats.pooled_ratio_interval(a["tokens"], a["decode_s"], t["tokens"], t["decode_s"])
        assert (as2d[f"{category}_low"], as2d[f"{category}_high"]) == pytest.approx((interval.low, interval.high))
    pooled_table = {r["config"]: r for r in records if r["title"] == "Pooled decode throughput"}
    assert as2d["overall"] == pytest.approx(pooled_table["as2d[B=7,drafter=small]"]["speedup"])
    assert (as2d["overall_low"], as2d["overall_high"]) == pytest.approx(
        (pooled_table["as2d[B=7,drafter=small]"]["speedup_low"], pooled_table["as2d[B=7,drafter=small]"]["speedup_high"]))
    assert table["target"]["math"] == 1.0


def test_the_summary_names_where_a_method_pays_and_where_it_loses(categorized):
    code, output = invoke("report", categorized, "--format", "jsonl")
    summary = [json.loads(line) for line in output.splitlines() if json.loads(line)["title"].startswith("Summary")]
    categories = pd.DataFrame([json.loads(line) for line in output.splitlines()
                               if json.loads(line)["title"] == "Speedup per category"]).set_index("config")
    for record in summary[1:]:
        row = categories.loc[record["config"]]
        for name in ("coding", "math"):
            kind = "pays" if row[f"{name}_low"] > 1 else "loses" if row[f"{name}_high"] < 1 else "unclear"
            assert f"{name} {row[name]:.2f}" in record[f"{kind}_in"]
    result = CliRunner().invoke(main, ["report", str(categorized)], env={"COLUMNS": "80"})
    screen = result.stdout.splitlines()
    assert sum(line.strip().startswith("by category: ") for line in screen) == len(summary) - 1
    assert len(screen) <= 80 and max(map(len, screen)) <= 80
