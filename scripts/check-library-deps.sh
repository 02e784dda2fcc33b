#!/usr/bin/env bash
# Proves that an application embedding strata (`strata = { default-features = false }`) gets
# none of the command line's dependencies: lists the library's normal dependency tree without
# default features and fails on any crate only `strata` the binary (features `cli`, `mcp`)
# needs. Then checks the layering ARCHITECTURE.md states as invariants: the seam pulls in no
# database driver, runtime or other strata crate, the compactor and recall no backend, the store no
# HTTP client and no tokio, recall no HTTP client, no tokio and not the compactor, the
# compactor not recall, the LLM client (strata-llm, the one HTTP client) no strata crate, and
# the message formats (strata-wire) no strata crate and no I/O.
# Takes seconds (no build); `cargo build -p strata --no-default-features --example chatbot` is
# the slower proof that the library alone compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

# Fails when the normal dependency tree of package $1 (default features) holds a crate whose
# name matches the anchored pattern $2.
refuse() {
  local found
  found=$(cargo tree -p "$1" -e normal --prefix none --format '{p}' \
    | sed 's/ v.*//' | sort -u | grep -E "$2" || true)
  if [ -n "$found" ]; then
    echo "$1 depends on what its layer must not:" >&2
    echo "$found" >&2
    exit 1
  fi
}
# The seam is owned by no backend: no database driver, no runtime, no other strata crate.
refuse strata-seam '^(rusqlite|postgres|tokio|reqwest|hyper|strata-store|strata-pg|strata-llm|strata-compactor|strata-recall)$'
refuse strata-store '^(reqwest|hyper|tokio|strata-llm|strata-compactor|strata-recall)$'
# The compactor and recall hold the seam, never a backend.
refuse strata-recall '^(reqwest|hyper|tokio|strata-llm|strata-compactor|strata-store|strata-pg|rusqlite)$'
refuse strata-compactor '^(strata-recall|strata-store|strata-pg|rusqlite)$'
refuse strata-llm '^(rusqlite|strata-store|strata-compactor|strata-recall)$'
# The message formats are plain data: no strata crate, no I/O.
refuse strata-wire '^(rusqlite|tokio|reqwest|hyper|strata-store|strata-llm|strata-compactor|strata-recall)$'
echo "layers: the seam holds no driver, no runtime and no other strata crate; compactor and recall hold no backend; the store and recall hold no HTTP client and no tokio; compactor and recall stay apart; strata-llm holds no store; strata-wire holds no strata crate and no I/O"

# The OTLP export (feature `otel`) is the command line's too: a library user turns it on by name.
CLI_ONLY='^(clap|indicatif|rmcp|toml|tracing-subscriber|strata-synth|opentelemetry|opentelemetry_sdk|opentelemetry-otlp|tracing-opentelemetry)$'
found=$(cargo tree -p strata --no-default-features -e normal --prefix none --format '{p}' \
  | sed 's/ v.*//' | sort -u | grep -E "$CLI_ONLY" || true)
if [ -n "$found" ]; then
  echo "strata without default features depends on the command line's crates:" >&2
  echo "$found" >&2
  exit 1
fi
echo "strata without default features: no command-line dependency"

# One runtime builder: the command line and the Python and Node bindings drive the engine through
# `strata::blocking` and never build a tokio runtime of their own.
found=$(grep -rn "tokio::runtime::Builder\|Runtime::new()" src/cli src/main.rs python/src node/src || true)
if [ -n "$found" ]; then
  echo "a tokio runtime built outside strata::blocking:" >&2
  echo "$found" >&2
  exit 1
fi
echo "runtimes: the command line and the bindings use strata::blocking"
