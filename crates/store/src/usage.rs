//! Usage accounting (schema 12, `llm_calls`): every call strata makes to an LLM, with the
//! tokens the server reported beside strata's own count and the time it took, so an operator
//! sees what the memory costs per summarizer, model and day (`strata stats`).

use chrono::{DateTime, Utc};
use rusqlite::params;
use serde::Serialize;

use crate::db::query_all;
use crate::error::{Error, Result};
use crate::metrics::CallTotals;
use crate::store::Store;
use crate::types::to_unix;

/// One call to an LLM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LlmCall {
    /// When it was made.
    pub at: DateTime<Utc>,
    /// `summary` or `chat`.
    pub purpose: String,
    /// Who called: the summarizer's name, or `chat`.
    pub caller: String,
    /// The model asked.
    pub model: String,
    /// Whether an answer came back (a summary may still be refused by the quality gate).
    pub ok: bool,
    /// Prompt tokens, as the server reported them (`usage.prompt_tokens`).
    pub prompt_tokens: Option<u64>,
    /// Completion tokens, as the server reported them.
    pub completion_tokens: Option<u64>,
    /// strata's own count of what it sent (the sources of a summary; the context of a chat).
    pub counted_prompt_tokens: Option<u64>,
    /// strata's own count of what came back.
    pub counted_completion_tokens: Option<u64>,
    /// How long the call took, in milliseconds.
    pub millis: u64,
}

/// The calls of one day, purpose, caller and model, summed (`strata stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UsageDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    /// The calls, as `strata metrics` sums them over all time.
    #[serde(flatten)]
    pub totals: CallTotals,
    /// Prompt tokens strata counted.
    pub counted_prompt_tokens: u64,
    /// Completion tokens strata counted.
    pub counted_completion_tokens: u64,
}

/// Checks calls before they are recorded: a purpose is `summary` or `chat`.
pub fn validate(calls: &[LlmCall]) -> Result<()> {
    match calls.iter().find(|call| !matches!(call.purpose.as_str(), "summary" | "chat")) {
        Some(call) => Err(Error::invalid("purpose", format!("{:?} is not summary or chat", call.purpose))),
        None => Ok(()),
    }
}

/// Every recorded call, oldest first.
pub(crate) fn all_calls(conn: &rusqlite::Connection) -> Result<Vec<LlmCall>> {
    query_all(
        conn,
        "SELECT at, purpose, caller, model, ok, prompt_tokens, completion_tokens, counted_prompt_tokens,
                counted_completion_tokens, millis
         FROM llm_calls ORDER BY id",
        [],
        |row| {
            let n = |index: usize| row.get::<_, Option<i64>>(index).map(|n| n.map(|n| n.max(0) as u64));
            Ok(LlmCall {
                at: crate::types::from_unix(row.get(0)?),
                purpose: row.get(1)?,
                caller: row.get(2)?,
                model: row.get(3)?,
                ok: row.get(4)?,
                prompt_tokens: n(5)?,
                completion_tokens: n(6)?,
                counted_prompt_tokens: n(7)?,
                counted_completion_tokens: n(8)?,
                millis: n(9)?.unwrap_or(0),
            })
        },
    )
}

/// Records calls made to an LLM (checked by [`validate`] first), in one transaction.
pub(crate) fn record(store: &Store, calls: &[LlmCall]) -> Result<()> {
    if calls.is_empty() {
        return Ok(());
    }
    validate(calls)?;
    store.write(|tx| insert_calls(tx, calls))
}

/// Writes calls to an LLM in the caller's transaction.
pub(crate) fn insert_calls(conn: &rusqlite::Connection, calls: &[LlmCall]) -> Result<()> {
    let count = |n: Option<u64>| n.map(|n| n.min(i64::MAX as u64) as i64);
    let mut insert = conn.prepare_cached(
        "INSERT INTO llm_calls(at, purpose, caller, model, ok, prompt_tokens, completion_tokens,
                               counted_prompt_tokens, counted_completion_tokens, millis)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for call in calls {
        insert.execute(params![
            to_unix(call.at),
            call.purpose,
            call.caller,
            call.model,
            call.ok,
            count(call.prompt_tokens),
            count(call.completion_tokens),
            count(call.counted_prompt_tokens),
            count(call.counted_completion_tokens),
            count(Some(call.millis)),
        ])?;
    }
    Ok(())
}

/// The calls made to LLMs, summed per day (UTC), purpose, caller and model, newest day first.
pub(crate) fn by_day(store: &Store) -> Result<Vec<UsageDay>> {
    store.read(|conn| {
        query_all(
            conn,
            "SELECT date(at, 'unixepoch') AS day, purpose, caller, model, count(*), count(*) - SUM(ok),
                    COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),
                    COALESCE(SUM(counted_prompt_tokens), 0), COALESCE(SUM(counted_completion_tokens), 0),
                    SUM(millis)
             FROM llm_calls GROUP BY day, purpose, caller, model
             ORDER BY day DESC, purpose, caller, model",
            [],
            |row| {
                let n = |index: usize| row.get::<_, i64>(index).map(|n| n.max(0) as u64);
                Ok(UsageDay {
                    day: row.get(0)?,
                    totals: CallTotals {
                        purpose: row.get(1)?,
                        caller: row.get(2)?,
                        model: row.get(3)?,
                        calls: n(4)?,
                        failures: n(5)?,
                        prompt_tokens: n(6)?,
                        completion_tokens: n(7)?,
                        millis: n(10)?,
                    },
                    counted_prompt_tokens: n(8)?,
                    counted_completion_tokens: n(9)?,
                })
            },
        )
    })
}
