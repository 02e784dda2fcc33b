//! What the database says about the work done, for `strata metrics` (the Prometheus text
//! format, rendered by the root package): every figure here is derived from stored rows, so
//! any process reads the same totals, whoever did the work.
//!
//! Tool calls are counted from the tool results a conversation stores (a tool message names its
//! tool; a hit is a result with a positive `count` or a non-empty `results`), so a bot that
//! stores its tool rounds (as `strata chat` does) gets them for free; calls nobody stored (an
//! MCP client's) are counted only in the process that ran them.

use rusqlite::Connection;

use crate::db::query_all;
use crate::error::Result;
use crate::store::Store;
pub(crate) use strata_seam::stats::{CallTotals, NodeTotals, RowTotals, StoreMetrics, ToolTotals};

fn count(conn: &Connection, sql: &str) -> Result<u64> {
    Ok(conn.query_row(sql, [], |row| row.get::<_, i64>(0))?.max(0) as u64)
}

/// The totals behind `strata metrics`, read in one snapshot.
pub(crate) fn read(store: &Store) -> Result<StoreMetrics> {
    let path = store.path().to_path_buf();
    store.read(|conn| {
        let snapshot = conn.unchecked_transaction()?;
        let conn = &*snapshot;
        let n = |row: &rusqlite::Row<'_>, index: usize| row.get::<_, i64>(index).map(|n| n.max(0) as u64);
        let nodes = query_all(
            conn,
            "SELECT summarizer, level, count(*), SUM(source_token_count), SUM(token_count)
             FROM summary_nodes GROUP BY summarizer, level ORDER BY summarizer, level",
            [],
            |row| {
                Ok(NodeTotals {
                    summarizer: row.get(0)?,
                    level: row.get(1)?,
                    nodes: n(row, 2)?,
                    source_tokens: n(row, 3)?,
                    tokens: n(row, 4)?,
                })
            },
        )?;
        let rejections = query_all(
            conn,
            "SELECT summarizer, reason, count FROM summary_rejections ORDER BY summarizer, reason",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, n(row, 2)?)),
        )?;
        let calls = query_all(
            conn,
            "SELECT purpose, caller, model, count(*), count(*) - SUM(ok), COALESCE(SUM(prompt_tokens), 0),
                    COALESCE(SUM(completion_tokens), 0), SUM(millis)
             FROM llm_calls GROUP BY purpose, caller, model ORDER BY purpose, caller, model",
            [],
            |row| {
                Ok(CallTotals {
                    purpose: row.get(0)?,
                    caller: row.get(1)?,
                    model: row.get(2)?,
                    calls: n(row, 3)?,
                    failures: n(row, 4)?,
                    prompt_tokens: n(row, 5)?,
                    completion_tokens: n(row, 6)?,
                    millis: n(row, 7)?,
                })
            },
        )?;
        // A tool's answer is JSON: `count` or `results` says whether it found something,
        // an `error` object that it failed. Text that is not JSON counts as a call only.
        let tools = query_all(
            conn,
            "SELECT name, count(*),
                    SUM(CASE WHEN json_valid(content) AND (coalesce(content ->> '$.count', 0) > 0
                              OR coalesce(json_array_length(content, '$.results'), 0) > 0
                              OR coalesce(json_array_length(content, '$.memories'), 0) > 0)
                        THEN 1 ELSE 0 END),
                    SUM(CASE WHEN json_valid(content) AND json_type(content, '$.error') = 'object'
                        THEN 1 ELSE 0 END)
             FROM messages WHERE role = 'tool' AND name IS NOT NULL GROUP BY name ORDER BY name",
            [],
            |row| {
                Ok(ToolTotals { tool: row.get(0)?, calls: n(row, 1)?, hits: n(row, 2)?, errors: n(row, 3)? })
            },
        )?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let totals = crate::metrics::row_totals(conn)?;
        Ok(StoreMetrics {
            sessions: totals.sessions,
            messages: totals.messages,
            compacted_messages: totals.compacted_messages,
            memories: totals.memories,
            nodes,
            rejections,
            calls,
            tools,
            embedding_backlog: crate::vectors::backlog_count(conn, None, None)?,
            forgets: count(conn, "SELECT count(*) FROM forgets")?,
            file_bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            wal_bytes: std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0),
        })
    })
}

/// The row totals, read on SQLite.
pub(crate) fn row_totals(conn: &Connection) -> Result<RowTotals> {
    let counts = conn.query_row(crate::kinds::ROW_TOTALS, [], |row| {
        Ok([row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?])
    })?;
    Ok(RowTotals::from_counts(counts))
}
