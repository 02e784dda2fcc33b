# strata: the two commands of the README's Quick start, and a few helpers.
# Both do all their own set-up on a fresh machine.

CARGO ?= cargo

.PHONY: demo test lint bench

# The main job: builds strata and runs the offline demo.
demo:
	$(CARGO) build --release --bin strata
	rm -f target/demo.db target/demo.db-wal target/demo.db-shm
	./target/release/strata --db target/demo.db ingest examples/sample.jsonl --session billing --persona coder
	./target/release/strata --db target/demo.db memory set user_preferences indentation "Tabs, never spaces." --persona coder
	./target/release/strata --db target/demo.db stats
	./target/release/strata --db target/demo.db view 13

# Every test: unit, integration, end-to-end and doctests.
test:
	$(CARGO) nextest run --workspace --no-fail-fast
	$(CARGO) test --workspace --doc

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	$(CARGO) bench --workspace
