//! The compactor's bookkeeping (failures, the quality gate's refusals, the token encoding),
//! usage accounting, and the totals `strata stats` and `strata metrics` show: every figure
//! derived from stored rows, so any process of a fleet reads the same.

use chrono::Utc;
use strata_seam::backend::{CompactionState, RAW_ARCHIVE, to_unix};
use strata_seam::stats::{
    CallTotals, LlmCall, NodeTotals, RejectionCount, RowTotals, Stats, StoreMetrics, SummarizerStats,
    ToolTotals, UsageDay,
};
use strata_seam::{Error, Missing, SessionId};

use crate::db::{Queries, Tx, pg};
use crate::vectors;

/// A session's failed summarizer calls in a row and whether it holds a raw archive, in one
/// read (the raw archives' partial index: nothing is read when there are none).
pub(crate) fn compaction_state(db: &mut impl Queries, session: SessionId) -> Result<CompactionState, Error> {
    let row = db
        .query_opt(
            &format!(
                "SELECT s.summarizer_failures, EXISTS (
                     SELECT 1 FROM summary_nodes n WHERE n.session_id = s.id AND n.summarizer = '{RAW_ARCHIVE}')
                 FROM sessions s WHERE s.id = $1"
            ),
            &[&session.0],
        )
        .map_err(pg)?
        .ok_or(Error::NotFound(Missing::Session(session)))?;
    Ok(CompactionState { summarizer_failures: row.get::<_, i32>(0).max(0) as u32, raw_archive: row.get(1) })
}

pub(crate) fn set_summarizer_failures(
    tx: &mut Tx<'_>,
    session: SessionId,
    failures: u32,
) -> Result<(), Error> {
    let failures = failures.min(i32::MAX as u32) as i32;
    tx.execute("UPDATE sessions SET summarizer_failures = $2 WHERE id = $1", &[&session.0, &failures])
        .map_err(pg)?;
    Ok(())
}

pub(crate) fn count_rejection(tx: &mut Tx<'_>, summarizer: &str, reason: &str) -> Result<(), Error> {
    tx.execute(
        "INSERT INTO summary_rejections (summarizer, reason, count, last_at) VALUES ($1, $2, 1, $3)
         ON CONFLICT (summarizer, reason) DO UPDATE
             SET count = summary_rejections.count + 1, last_at = EXCLUDED.last_at",
        &[&summarizer, &reason, &to_unix(Utc::now())],
    )
    .map_err(pg)?;
    Ok(())
}

pub(crate) fn record_llm_calls(tx: &mut Tx<'_>, calls: &[LlmCall]) -> Result<(), Error> {
    strata_seam::backend::validate_llm_calls(calls)?;
    let count = |n: Option<u64>| n.map(|n| n.min(i64::MAX as u64) as i64);
    for call in calls {
        tx.execute(
            "INSERT INTO llm_calls(at, purpose, caller, model, ok, prompt_tokens, completion_tokens,
                                   counted_prompt_tokens, counted_completion_tokens, millis)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &to_unix(call.at),
                &call.purpose,
                &call.caller,
                &call.model,
                &call.ok,
                &count(call.prompt_tokens),
                &count(call.completion_tokens),
                &count(call.counted_prompt_tokens),
                &count(call.counted_completion_tokens),
                &count(Some(call.millis)),
            ],
        )
        .map_err(pg)?;
    }
    Ok(())
}

pub(crate) fn token_encoding(db: &mut impl Queries) -> Result<Option<String>, Error> {
    Ok(db
        .query_opt("SELECT encoding FROM token_encoding WHERE id = 1", &[])
        .map_err(pg)?
        .map(|row| row.get(0)))
}

/// Records `encoding` unless one is recorded; returns the recorded one (the first writer's).
pub(crate) fn claim_token_encoding(tx: &mut Tx<'_>, encoding: &str) -> Result<String, Error> {
    tx.execute(
        "INSERT INTO token_encoding (id, encoding) VALUES (1, $1) ON CONFLICT DO NOTHING",
        &[&encoding],
    )
    .map_err(pg)?;
    Ok(tx.query_one("SELECT encoding FROM token_encoding WHERE id = 1", &[]).map_err(pg)?.get(0))
}

fn count(tx: &mut Tx<'_>, sql: &str) -> Result<u64, Error> {
    Ok(tx.query_one(sql, &[]).map_err(pg)?.get::<_, i64>(0).max(0) as u64)
}

fn n(row: &postgres::Row, index: usize) -> u64 {
    row.get::<_, Option<i64>>(index).unwrap_or(0).max(0) as u64
}

fn row_totals(tx: &mut Tx<'_>) -> Result<RowTotals, Error> {
    let row = tx.query_one(strata_store::kinds::ROW_TOTALS, &[]).map_err(pg)?;
    Ok(RowTotals::from_counts([row.get(0), row.get(1), row.get(2), row.get(3)]))
}

fn database_bytes(tx: &mut Tx<'_>) -> Result<u64, Error> {
    count(tx, "SELECT pg_database_size(current_database())")
}

fn rejections(tx: &mut Tx<'_>) -> Result<Vec<RejectionCount>, Error> {
    let rows = tx
        .query("SELECT summarizer, reason, count FROM summary_rejections ORDER BY summarizer, count DESC, reason", &[])
        .map_err(pg)?;
    Ok(rows
        .iter()
        .map(|row| RejectionCount { summarizer: row.get(0), reason: row.get(1), count: n(row, 2) })
        .collect())
}

/// `strata stats`: counts of everything stored. `file_bytes` is the database's size on the
/// server.
pub(crate) fn stats(tx: &mut Tx<'_>) -> Result<Stats, Error> {
    let mut nodes_per_level = Vec::new();
    for row in tx
        .query("SELECT level, count(*) FROM summary_nodes GROUP BY level ORDER BY level", &[])
        .map_err(pg)?
    {
        let level = row.get::<_, i32>(0).max(0) as usize;
        nodes_per_level.resize(level + 1, 0);
        nodes_per_level[level] = n(&row, 1);
    }
    let summarizers = tx
        .query(
            "SELECT summarizer, count(*), SUM(source_token_count)::BIGINT, SUM(token_count)::BIGINT
             FROM summary_nodes GROUP BY summarizer ORDER BY count(*) DESC",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|row| SummarizerStats {
            summarizer: row.get(0),
            nodes: n(row, 1),
            tokens_in: n(row, 2),
            tokens_out: n(row, 3),
        })
        .collect();
    let totals = row_totals(tx)?;
    Ok(Stats {
        sessions: totals.sessions,
        messages: totals.messages,
        compacted_messages: totals.compacted_messages,
        message_tokens: count(tx, "SELECT COALESCE(SUM(token_count), 0)::BIGINT FROM messages")?,
        nodes_per_level,
        memories: totals.memories,
        embedding_backlog: vectors::backlog_count(tx, None, None)?,
        file_bytes: database_bytes(tx)?,
        summarizers,
        rejections: rejections(tx)?,
    })
}

/// The calls made to LLMs, summed per day (UTC), purpose, caller and model, newest day first.
pub(crate) fn usage_by_day(db: &mut impl Queries) -> Result<Vec<UsageDay>, Error> {
    Ok(db
        .query(
            "SELECT to_char(to_timestamp(at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, purpose, caller, model,
                    count(*), count(*) FILTER (WHERE NOT ok),
                    COALESCE(SUM(prompt_tokens), 0)::BIGINT, COALESCE(SUM(completion_tokens), 0)::BIGINT,
                    COALESCE(SUM(counted_prompt_tokens), 0)::BIGINT,
                    COALESCE(SUM(counted_completion_tokens), 0)::BIGINT, SUM(millis)::BIGINT
             FROM llm_calls GROUP BY day, purpose, caller, model ORDER BY day DESC, purpose, caller, model",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|row| UsageDay {
            day: row.get(0),
            totals: CallTotals {
                purpose: row.get(1),
                caller: row.get(2),
                model: row.get(3),
                calls: n(row, 4),
                failures: n(row, 5),
                prompt_tokens: n(row, 6),
                completion_tokens: n(row, 7),
                millis: n(row, 10),
            },
            counted_prompt_tokens: n(row, 8),
            counted_completion_tokens: n(row, 9),
        })
        .collect())
}

/// `strata metrics`: the totals, read in one snapshot. PostgreSQL has no write-ahead file of
/// strata's own, so its size is 0.
pub(crate) fn metrics(tx: &mut Tx<'_>) -> Result<StoreMetrics, Error> {
    let nodes = tx
        .query(
            "SELECT summarizer, level, count(*), SUM(source_token_count)::BIGINT, SUM(token_count)::BIGINT
             FROM summary_nodes GROUP BY summarizer, level ORDER BY summarizer, level",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|row| NodeTotals {
            summarizer: row.get(0),
            level: i64::from(row.get::<_, i32>(1)),
            nodes: n(row, 2),
            source_tokens: n(row, 3),
            tokens: n(row, 4),
        })
        .collect();
    let rejections = rejections(tx)?
        .into_iter()
        .map(|rejection| (rejection.summarizer, rejection.reason, rejection.count))
        .collect();
    let calls = tx
        .query(
            "SELECT purpose, caller, model, count(*), count(*) FILTER (WHERE NOT ok),
                    COALESCE(SUM(prompt_tokens), 0)::BIGINT, COALESCE(SUM(completion_tokens), 0)::BIGINT,
                    SUM(millis)::BIGINT
             FROM llm_calls GROUP BY purpose, caller, model ORDER BY purpose, caller, model",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|row| CallTotals {
            purpose: row.get(0),
            caller: row.get(1),
            model: row.get(2),
            calls: n(row, 3),
            failures: n(row, 4),
            prompt_tokens: n(row, 5),
            completion_tokens: n(row, 6),
            millis: n(row, 7),
        })
        .collect();
    // A tool's answer is JSON: `count`, `results` or `memories` says whether it found
    // something, an `error` object that it failed; text that is not JSON counts as a call.
    let tools = tx
        .query(
            "SELECT name, count(*),
                    count(*) FILTER (WHERE j IS NOT NULL AND (
                        coalesce(CASE WHEN jsonb_typeof(j -> 'count') = 'number' THEN (j ->> 'count')::NUMERIC END, 0) > 0
                        OR coalesce(CASE WHEN jsonb_typeof(j -> 'results') = 'array' THEN jsonb_array_length(j -> 'results') END, 0) > 0
                        OR coalesce(CASE WHEN jsonb_typeof(j -> 'memories') = 'array' THEN jsonb_array_length(j -> 'memories') END, 0) > 0)),
                    count(*) FILTER (WHERE jsonb_typeof(j -> 'error') = 'object')
             FROM (SELECT name, CASE WHEN content ~ '^\\s*\\{' AND pg_input_is_valid(content, 'jsonb')
                                     THEN content::jsonb END AS j
                   FROM messages WHERE role = 'tool' AND name IS NOT NULL) tool
             GROUP BY name ORDER BY name",
            &[],
        )
        .map_err(pg)?
        .iter()
        .map(|row| ToolTotals { tool: row.get(0), calls: n(row, 1), hits: n(row, 2), errors: n(row, 3) })
        .collect();
    let totals = row_totals(tx)?;
    Ok(StoreMetrics {
        sessions: totals.sessions,
        messages: totals.messages,
        compacted_messages: totals.compacted_messages,
        memories: totals.memories,
        nodes,
        rejections,
        calls,
        tools,
        embedding_backlog: vectors::backlog_count(tx, None, None)?,
        forgets: count(tx, "SELECT count(*) FROM forgets")?,
        file_bytes: database_bytes(tx)?,
        wal_bytes: 0,
    })
}
