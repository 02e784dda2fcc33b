# strata: the two commands of the README's Quick start, and a few helpers.
# Both do all their own set-up on a fresh machine.

CARGO ?= cargo
# The test runner `make test` installs when it is missing (pinned; `cargo install --locked`).
NEXTEST_VERSION ?= 0.9.143

.PHONY: demo test test-rust test-python test-ts python wheel bench-python bench-ts test-llm lint bench eval embed-assets

# The Python package lives in a virtual environment under target/ (python/ holds its source).
PYTHON ?= python3
VENV ?= target/python-venv
VENV_PYTHON := $(VENV)/bin/python

# Local embedding model + ONNX Runtime for semantic search (pinned wheels, cached; see the script).
embed-assets:
	./scripts/fetch-embed-assets.sh

# The main job: builds strata and runs the offline demo. The build holds only what the demo
# runs (profile `demo`, Cargo.toml): `cargo build --release` builds every command.
demo: embed-assets
	$(CARGO) build --profile demo --bin strata --no-default-features --features cli
	rm -f target/demo.db target/demo.db-wal target/demo.db-shm
	./target/demo/strata --db target/demo.db demo

# Every test: unit, integration, end-to-end and doctests. cargo-nextest is installed when it is
# missing; where it cannot be (no network to crates.io), `cargo test` runs the same tests.
test: test-rust test-python test-ts

# The engine's behaviour tests (tests/) run a second time with each `Strata` database on
# PostgreSQL (STRATA_TEST_BACKEND=postgres, tests/util.rs). Left out, by name, in this one place:
# What only a SQLite file has: its bytes on disk, its -wal, a damaged or foreign file, file
# locks and busy timeouts, `backup`/`restore` of a file, secure_delete's zeroed pages, a
# kill timed by the -wal's growth, "writes nothing" checked as the files' bytes.
PG_SKIP_FILE_ONLY := test(=cli_store::doctor_backup_and_a_damaged_file) \
  | test(=cli_store::locked_database_times_out_with_a_clear_error) \
  | test(=cli_store::newer_database_is_refused) | test(=cli_store::not_a_database_is_refused) \
  | test(=cli_forget::forget_persona_leaves_none_of_its_bytes_and_bob_unchanged) \
  | test(=reliability::a_backup_is_restored_and_takes_writes) \
  | test(=reliability::a_damaged_file_takes_no_writes) \
  | test(=reliability::a_damaged_wal_is_reported_instead_of_losing_commits_silently) \
  | test(=reliability::another_writer_is_not_damage_and_opening_a_session_only_reads) \
  | test(=reliability::doctor_full_reports_a_tampered_schema) \
  | test(=reliability::readers_never_wait_for_the_write_lock) \
  | test(=reliability::foreign_sqlite_files_are_byte_identical_after_every_command) \
  | test(=reliability::forget_dry_run_writes_nothing) \
  | test(=crash::kill_during_ingest_writes_all_or_nothing)
# Tests that make their own databases whatever the backend (eval's scratch databases, the
# PostgreSQL tests, a file in a directory of their own): a second run tests nothing new.
PG_SKIP_OWN_DATABASES := test(/^cli_eval::/) | test(/^postgres::/) | test(/^tool_names::/)
PG_SKIP := $(PG_SKIP_FILE_ONLY) | $(PG_SKIP_OWN_DATABASES)

# The PostgreSQL backend's tests run against a real server (PostgreSQL 18 with pgvector, from
# a pinned PyPI wheel; scripts/postgres.sh), started here and stopped afterwards, pass or fail.
test-rust: embed-assets
	@export STRATA_TEST_POSTGRES="$$(./scripts/postgres.sh url)" || exit 1; \
	if $(CARGO) nextest --version >/dev/null 2>&1 \
	    || $(CARGO) install --locked cargo-nextest --version $(NEXTEST_VERSION); then \
	  $(CARGO) nextest run --workspace --no-fail-fast && $(CARGO) test --workspace --doc \
	  && STRATA_TEST_BACKEND=postgres $(CARGO) nextest run -p strata --test tests --no-fail-fast \
	     -E 'not ($(PG_SKIP))'; \
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

# The TypeScript package (node/): its npm dependencies from the committed lockfile, then `npm
# test`, which builds the addon from this checkout with cargo's dev profile (node/build.mjs
# copies it to node/strata.node) and runs the typecheck and the node:test suite, the Vercel AI
# SDK bot included.
test-ts: embed-assets
	cd node && npm ci --no-audit --no-fund --loglevel=error
	cd node && CARGO="$(CARGO)" npm test

# A release wheel (abi3: one file for CPython 3.9 and later) in target/wheels.
wheel:
	@test -x $(VENV_PYTHON) || $(PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) -m pip wheel --quiet --no-deps ./python -w target/wheels
	@ls target/wheels/*.whl

# The binding's cost beside the Rust calls, release builds (benches/README.md).
bench-python: embed-assets python
	$(CARGO) bench --bench binding
	$(VENV_PYTHON) benches/binding.py

# The Node binding's cost beside the same Rust calls, release builds (benches/README.md).
bench-ts: embed-assets
	cd node && npm ci --no-audit --no-fund --loglevel=error && CARGO="$(CARGO)" npm run --silent build -- --release
	$(CARGO) bench --bench binding
	node benches/binding.mjs

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
	# The demo's build (`make demo`): the command line without PostgreSQL, MCP and OTLP.
	$(CARGO) clippy --bin strata --no-default-features --features cli -- -D warnings
	RUSTDOCFLAGS=-Dwarnings $(CARGO) doc --no-deps --workspace
	./scripts/check-architecture.sh

bench:
	$(CARGO) bench --workspace
