# The two commands a fresh clone needs: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: install demo test bench clean

$(BIN)/specbench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

install: $(BIN)/specbench

demo: install
	$(BIN)/specbench demo

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/replay_speed.py

clean:
	rm -rf $(VENV) build *.egg-info
