//! Usage accounting (schema 12, `llm_calls`): every call strata makes to an LLM, with the
//! tokens the server reported beside strata's own count and the time it took, so an operator
//! sees what the memory costs per summarizer, model and day (`strata stats`).

use rusqlite::params;

use crate::db::query_all;
use crate::error::Result;
use crate::metrics::CallTotals;
use crate::store::Store;
use crate::types::to_unix;
pub(crate) use strata_seam::stats::{LlmCall, UsageDay};

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
    strata_seam::backend::validate_llm_calls(calls)?;
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
