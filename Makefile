# The two commands a fresh clone needs: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

# System tools: espeak-ng and sox synthesize the speech the audio tests use.
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install deps demo test bench clean

$(BIN)/specbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/specbench

deps:
	@command -v espeak-ng >/dev/null && command -v sox >/dev/null || \
	  ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q espeak-ng sox)

demo: install
	$(BIN)/specbench demo

test: install deps
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/replay_speed.py

clean:
	rm -rf $(VENV) build *.egg-info
