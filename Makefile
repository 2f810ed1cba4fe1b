# Each target installs what it needs on a fresh machine with Python 3.11+, make and git.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-system run test bench install-local demo clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Jarvis needs Python 3.11 or newer; found " + sys.version.split()[0])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# System packages (bubblewrap for the sandbox, chromium for browser tests, postgresql for the storage tests).
install-system:
	@scripts/install-system-deps.sh

run: install
	@scripts/install-system-deps.sh bubblewrap
	$(VENV)/bin/jarvis run

test: install install-system
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install install-system
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache test-output
