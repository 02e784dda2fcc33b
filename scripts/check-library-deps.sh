#!/usr/bin/env bash
# Proves that an application embedding strata (`strata = { default-features = false }`) gets
# none of the command line's dependencies: lists the library's normal dependency tree without
# default features and fails on any crate only `strata` the binary (features `cli`, `mcp`)
# needs. Takes seconds (no build); `cargo build -p strata --no-default-features --example
# chatbot` is the slower proof that the library alone compiles.
set -euo pipefail
cd "$(dirname "$0")/.."
CLI_ONLY='^(clap|indicatif|rmcp|toml|tracing-subscriber|strata-synth)$'
found=$(cargo tree -p strata --no-default-features -e normal --prefix none --format '{p}' \
  | sed 's/ v.*//' | sort -u | grep -E "$CLI_ONLY" || true)
if [ -n "$found" ]; then
  echo "strata without default features depends on the command line's crates:" >&2
  echo "$found" >&2
  exit 1
fi
echo "strata without default features: no command-line dependency"
