//! The spans of the memory operations inside a tool call, named and attributed as
//! OpenTelemetry's GenAI semantic conventions say for memory: `search_memory` (`memory_grep`,
//! `memory_search`), `upsert_memory` (`save_memory`: a key is created or updated, the caller
//! does not choose which) and `delete_memory` (expired memories purged). The memory store is
//! the persona's (`gen_ai.memory.store.id`); the query and the records' text are never
//! recorded (the conventions make them opt-in; strata does not offer them). Without a
//! subscriber that wants them the spans are disabled and cost a check each.

use serde_json::Value;
use tracing::field::Empty;

use crate::error::Result;

/// Runs a search in a `search_memory` span and records how many hits it answered.
pub(super) fn search(persona: &str, work: impl FnOnce() -> Result<Value>) -> Result<Value> {
    let span = tracing::info_span!(
        "search_memory",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "search_memory",
        gen_ai.memory.store.id = persona,
        gen_ai.memory.record.count = Empty,
        error.type = Empty,
    );
    let _entered = span.enter();
    let answer = work();
    match &answer {
        Ok(value) => {
            if let Some(hits) = value.get("results").and_then(Value::as_array) {
                span.record("gen_ai.memory.record.count", count(hits.len()));
            }
        }
        Err(error) => failed(&span, error),
    }
    answer
}

/// Runs a save of `key` in an `upsert_memory` span.
pub(super) fn upsert(persona: &str, key: &str, work: impl FnOnce() -> Result<Value>) -> Result<Value> {
    let span = tracing::info_span!(
        "upsert_memory",
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "upsert_memory",
        gen_ai.memory.store.id = persona,
        gen_ai.memory.record.id = key,
        gen_ai.memory.record.count = 1,
        error.type = Empty,
    );
    let _entered = span.enter();
    let answer = work();
    if let Err(error) = &answer {
        failed(&span, error);
    }
    answer
}

/// The span of a purge of expired memories (every persona's: no store id), with how many it
/// deleted recorded by [`deleted`].
pub(crate) fn purge() -> tracing::Span {
    tracing::info_span!(
        "delete_memory",
        otel.kind = "internal",
        gen_ai.operation.name = "delete_memory",
        gen_ai.memory.record.count = Empty,
    )
}

/// Records on a [`purge`] span how many memories went.
pub(crate) fn deleted(span: &tracing::Span, count: usize) {
    span.record("gen_ai.memory.record.count", self::count(count));
}

/// A count as OpenTelemetry's signed integer (the layer would export a `usize` as a string).
fn count(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Marks `span` failed with the error's kind (what the tool's answer names), not its text.
fn failed(span: &tracing::Span, error: &crate::error::Error) {
    span.record("otel.status_code", "error");
    span.record("error.type", error.kind());
}
