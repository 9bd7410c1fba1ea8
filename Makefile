# make demo: run the main job on the built-in demo cluster.  make test: the test suite.
# Both create .venv and install what they need on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo test lint format clean

# The demo needs the package alone; the tests add linters, type checker and test servers.
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

$(STAMP): $(DEMO_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/foresize simulate --scenario demo

# One pytest worker a core: the suite is CPU-bound (simulations, real operator processes);
# in one process it took over 10 minutes on the 2-core CI machine, on two about 7.
test: lint
	$(BIN)/python -m pytest -q -n auto

# Style, types (mypy: strict for the core) and the import contract (see pyproject.toml).
# .pre-commit-config.yaml runs the same commands.
lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

format: $(STAMP)
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
