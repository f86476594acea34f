"""A window that cannot fit the model's context is refused before any model work, naming the
window, its token count and the context (the real runner's tokenizer on the demo model); the
chat templates a window may name are llama.cpp's, as the runner lists them."""

from __future__ import annotations

import json
import subprocess

from click.testing import CliRunner

from specbench.cli import main
from specbench.schemas.windows import BUILTIN_TEMPLATES, make_text_window, save_windows


def error_lines(output: str) -> list[str]:
    assert "Traceback" not in output
    return [line for line in output.splitlines() if line.startswith("Error: ")]


def test_a_window_beyond_the_context_is_refused_before_any_model_work(tmp_path, runner, demo_model_path):
    target = demo_model_path("smollm2-135m")
    text = " ".join(f"word{i % 1000}" for i in range(40_000))  # about 200,000 characters
    windows = tmp_path / "windows.jsonl"
    save_windows(windows, [make_text_window("short", "hello there", "Repeat this.", 8, "long", "dev"),
                           make_text_window("long", text, "Repeat this.", 8, "long", "dev")])
    for command, out in ((["run", windows, "--device", "local", "--native", "--target", target, "--methods", "target"],
                          tmp_path / "native"),
                         (["trace", windows, "--target", target, "--drafter", f"small={target}"], tmp_path / "traces")):
        result = CliRunner().invoke(main, [str(a) for a in [*command, "--out", out]])
        assert result.exit_code == 1, result.output
        (line,) = error_lines(result.output)
        assert line.startswith("Error: window 'long': its prompt is ")
        tokens = int(line.removeprefix("Error: window 'long': its prompt is ").split()[0])
        assert tokens > 8192
        assert line == (f"Error: window 'long': its prompt is {tokens} tokens for {target.stem} and its cap 8, "
                        f"{tokens + 8} in all, beyond the model's context of 8192 tokens "
                        "(hint: shorten the window's text or lower its cap)")
        assert not out.exists()


def test_the_known_chat_templates_are_the_runners(runner):
    info = json.loads(subprocess.run([str(runner), "--info"], capture_output=True, text=True, check=True).stdout)
    assert tuple(info["chat_templates"]) == BUILTIN_TEMPLATES
