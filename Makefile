# strata: the two commands of the README's Quick start, and a few helpers.
# Both do all their own set-up on a fresh machine.

CARGO ?= cargo
# The test runner `make test` installs when it is missing (pinned; `cargo install --locked`).
NEXTEST_VERSION ?= 0.9.143

.PHONY: demo test test-rust test-python python wheel bench-python test-llm lint bench eval embed-assets

# The Python package lives in a virtual environment under target/ (python/ holds its source).
PYTHON ?= python3
VENV ?= target/python-venv
VENV_PYTHON := $(VENV)/bin/python

# Local embedding model + ONNX Runtime for semantic search (pinned wheels, cached; see the script).
embed-assets:
	./scripts/fetch-embed-assets.sh

# The main job: builds strata and runs the offline demo.
demo: embed-assets
	$(CARGO) build --release --bin strata
	rm -f target/demo.db target/demo.db-wal target/demo.db-shm
	./target/release/strata --db target/demo.db demo

# Every test: unit, integration, end-to-end and doctests. cargo-nextest is installed when it is
# missing; where it cannot be (no network to crates.io), `cargo test` runs the same tests.
test: test-rust test-python

# The PostgreSQL backend's tests run against a real server (PostgreSQL 18 with pgvector, from
# a pinned PyPI wheel; scripts/postgres.sh), started here and stopped afterwards, pass or fail.
test-rust: embed-assets
	@export STRATA_TEST_POSTGRES="$$(./scripts/postgres.sh url)" || exit 1; \
	if $(CARGO) nextest --version >/dev/null 2>&1 \
	    || $(CARGO) install --locked cargo-nextest --version $(NEXTEST_VERSION); then \
	  $(CARGO) nextest run --workspace --no-fail-fast && $(CARGO) test --workspace --doc; \
	else \
	  echo "cargo-nextest is unavailable: running cargo test" >&2; \
	  $(CARGO) test --workspace --no-fail-fast; \
	fi; status=$$?; ./scripts/postgres.sh stop; exit $$status

# The Python package with its test dependencies (pytest, the openai client), installed from
# this checkout into $(VENV). `make test` builds it with cargo's dev profile, which reuses the
# dependencies the Rust tests compiled; a user's `pip install ./python` builds it optimized.
python:
	@test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip install --quiet --upgrade pip
	MATURIN_PEP517_ARGS="$(MATURIN_ARGS)" $(VENV_PYTHON) -m pip install --quiet "./python[test]"

test-python: MATURIN_ARGS = --profile dev
test-python: embed-assets python
	$(CARGO) build --bin strata  # test_serve.py drives the binary
	@export STRATA_TEST_POSTGRES="$$(./scripts/postgres.sh url)" || exit 1; \
	$(VENV_PYTHON) -m pytest python/tests -q; status=$$?; ./scripts/postgres.sh stop; exit $$status

# A release wheel (abi3: one file for CPython 3.9 and later) in target/wheels.
wheel:
	@test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip wheel --quiet --no-deps ./python -w target/wheels
	@ls target/wheels/*.whl

# The binding's cost beside the Rust calls, release builds (benches/README.md).
bench-python: embed-assets python
	$(CARGO) bench --bench binding
	$(VENV_PYTHON) benches/binding.py

# Retrieval quality on the shared dev set (../shared/eval) and planted facts; see benches/README.md.
eval: embed-assets
	$(CARGO) build --release --bin strata
	./target/release/strata eval retrieval --data ../shared/eval/conversations --ablate
	./target/release/strata eval planted

# Opt-in, slow (a few minutes; not part of `make test` or CI): a real local model server
# (llama-cpp-python + Qwen2.5-Coder-1.5B, set up and started by scripts/llm-rig.sh; the first run
# compiles it for about 7 minutes), then a compaction with the OpenAI-compatible summarizer and a
# `strata chat` turn in which the model calls memory_grep. `scripts/llm-rig.sh stop` stops it.
test-llm: embed-assets
	STRATA_LLM_URL=$$(./scripts/llm-rig.sh start) \
	  nice $(CARGO) test -p strata --features llm-rig --test llm_rig -- --nocapture --test-threads 1

# The checks .ci/run makes besides the tests.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS=-Dwarnings $(CARGO) doc --no-deps --workspace
	./scripts/check-architecture.sh

bench:
	$(CARGO) bench --workspace
