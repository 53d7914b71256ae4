# Everything a newcomer needs: `make serve` runs the API server on the embedded models,
# `make test` runs the whole test suite. Both create and fill .venv on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# What `make install` puts in the venv: the engine, the server, both adapters, notebooks, tests.
EXTRAS ?= local,server,langchain,llamaindex,notebooks,dev
HOST ?= 127.0.0.1
PORT ?= 8000
KEY_FILE ?= .core-api-keys
PYTEST_ARGS ?=
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: install install-default-model test serve lint clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

# The default chat model (1.1 GB); the small profile does not need it.
$(VENV)/.installed-models-default: constraints.txt | install
	$(PIP) install --quiet -c constraints.txt -e ".[models-default]"
	touch $@

install-default-model: $(VENV)/.installed-models-default

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

# Serves on $(HOST):$(PORT). Keys come from CORE_API_KEYS, else from $(KEY_FILE), which is
# created with a fresh random key on first use and printed.
serve: install $(if $(filter small,$(CORE_MODEL_PROFILE)),,install-default-model)
	@if [ -z "$$CORE_API_KEYS" ] && [ ! -s $(KEY_FILE) ]; then \
		$(PY) -c "import secrets; print(secrets.token_urlsafe(32))" > $(KEY_FILE); \
		chmod 600 $(KEY_FILE); fi
	@if [ -z "$$CORE_API_KEYS" ]; then echo "API key (from $(KEY_FILE)): $$(head -n1 $(KEY_FILE))"; \
		else echo "API keys: from CORE_API_KEYS"; fi
	$(VENV)/bin/core-textmodels serve --host $(HOST) --port $(PORT) \
		$(if $(CORE_API_KEYS),,--api-key-file $(KEY_FILE))

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
