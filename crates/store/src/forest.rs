//! The summary forest: Level-0 nodes over messages, level L+1 nodes over level-L nodes, and
//! the compactor's bookkeeping about it ([`Upkeep`]): consecutive summarizer failures per
//! session, summaries the quality gate refused per reason, and the raw archives waiting for a
//! real summary.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::queues;
use crate::store::Store;
use crate::types::FromRow;
use crate::types::{Level, NewSummary, NodeId, SessionId, SummaryNode, to_unix};
pub(crate) use strata_seam::backend::CompactionState;
pub(crate) use strata_seam::backend::{NodePlace, RAW_ARCHIVE, check_adjacent, plan_merge};

/// Inserts a Level-0 node over the messages `first_seq..=last_seq` of a session and links them
/// to it. Call inside an immediate transaction: the checks and the link are one step, so two
/// compactors racing for the same messages cannot both win.
///
/// Refused when the range is empty, has a gap, holds a pinned message, or any message in it is
/// already covered ([`Error::AlreadyCovered`]).
pub fn insert_leaf(
    conn: &Connection,
    session: SessionId,
    first_seq: i64,
    last_seq: i64,
    summary: &NewSummary,
    now: DateTime<Utc>,
) -> Result<SummaryNode> {
    strata_seam::backend::validate_summary(summary)?;
    if first_seq < 0 || last_seq < first_seq {
        return Err(Error::invalid("range", format!("{first_seq}..={last_seq} is not a range of seqs")));
    }
    let (count, pinned, first_time, last_time, tokens): (i64, i64, Option<f64>, Option<f64>, i64) = conn
        .prepare_cached(
            "SELECT count(*), COALESCE(SUM(pinned), 0), MIN(created_at), MAX(created_at),
                    COALESCE(SUM(token_count), 0)
             FROM messages WHERE session_id = ?1 AND seq BETWEEN ?2 AND ?3",
        )?
        .query_row(params![session, first_seq, last_seq], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?))
        })?;
    if count != last_seq - first_seq + 1 {
        return Err(Error::invalid(
            "range",
            format!("session {session} has no messages for every seq in {first_seq}..={last_seq}"),
        ));
    }
    if pinned > 0 {
        return Err(Error::invalid("range", format!("{first_seq}..={last_seq} holds a pinned message")));
    }
    let covered: Option<(i64, NodeId)> = conn
        .prepare_cached(
            "SELECT seq, summary_id FROM messages
             WHERE session_id = ?1 AND seq BETWEEN ?2 AND ?3 AND summary_id IS NOT NULL
             ORDER BY seq LIMIT 1",
        )?
        .query_row(params![session, first_seq, last_seq], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if let Some((seq, node)) = covered {
        return Err(Error::AlreadyCovered { session, seq, node });
    }
    let id = insert(
        conn,
        &NodePlace {
            session,
            level: Level::LEAF,
            first_seq,
            last_seq,
            start_time: first_time.unwrap_or_default(),
            end_time: last_time.unwrap_or_default(),
            source_token_count: tokens,
        },
        summary,
        now,
    )?;
    conn.prepare_cached(
        "UPDATE messages SET summary_id = ?1 WHERE session_id = ?2 AND seq BETWEEN ?3 AND ?4",
    )?
    .execute(params![id, session, first_seq, last_seq])?;
    by_id(conn, id)
}

/// Merges level-L root nodes into one level L+1 node. Call inside an immediate transaction.
///
/// The children must be at least two roots of one session and one level that are adjacent
/// among that level's roots (no other root of the level between them); a child that already
/// has a parent is refused with [`Error::AlreadyMerged`].
pub fn merge(
    conn: &Connection,
    children: &[NodeId],
    summary: &NewSummary,
    now: DateTime<Utc>,
) -> Result<SummaryNode> {
    strata_seam::backend::validate_summary(summary)?;
    let nodes = children.iter().map(|&id| by_id(conn, id)).collect::<Result<Vec<_>>>()?;
    let (nodes, parent) = plan_merge(nodes)?;
    let (first, last) = (&nodes[0], &nodes[nodes.len() - 1]);
    let between: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM summary_nodes
             WHERE session_id = ?1 AND level = ?2 AND parent_id IS NULL AND first_seq BETWEEN ?3 AND ?4",
        )?
        .query_row(params![parent.session, first.level, first.first_seq, last.first_seq], |row| row.get(0))?;
    check_adjacent(between, &nodes)?;
    let id = insert(conn, &parent, summary, now)?;
    let mut link = conn.prepare_cached("UPDATE summary_nodes SET parent_id = ?1 WHERE id = ?2")?;
    for node in &nodes {
        link.execute(params![id, node.id])?;
    }
    by_id(conn, id)
}

/// Replaces the text of a node, but only if it was written by `expected_summarizer`: used to
/// re-summarize `raw-archive` nodes once the summarizer is back, without racing another writer.
pub fn replace_summary(
    conn: &Connection,
    id: NodeId,
    expected_summarizer: &str,
    summary: &NewSummary,
    now: DateTime<Utc>,
) -> Result<SummaryNode> {
    strata_seam::backend::validate_summary(summary)?;
    let changed = conn
        .prepare_cached(
            "UPDATE summary_nodes SET headline = ?3, body = ?4, token_count = ?5, summarizer = ?6
             WHERE id = ?1 AND summarizer = ?2",
        )?
        .execute(params![
            id,
            expected_summarizer,
            summary.headline,
            summary.body,
            summary.token_count,
            summary.summarizer
        ])?;
    if changed == 0 {
        let node = by_id(conn, id)?;
        return Err(Error::AlreadyReplaced { node: id, summarizer: node.summarizer });
    }
    queues::queue(conn, id, &summary.memory_updates, now)?;
    by_id(conn, id)
}

fn insert(conn: &Connection, row: &NodePlace, summary: &NewSummary, now: DateTime<Utc>) -> Result<NodeId> {
    conn.prepare_cached(
        "INSERT INTO summary_nodes(session_id, level, headline, body, first_seq, last_seq, start_time,
                                   end_time, token_count, source_token_count, summarizer, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        row.session,
        row.level,
        summary.headline,
        summary.body,
        row.first_seq,
        row.last_seq,
        row.start_time,
        row.end_time,
        summary.token_count,
        row.source_token_count,
        summary.summarizer,
        to_unix(now),
    ])?;
    let id = NodeId(conn.last_insert_rowid());
    queues::queue(conn, id, &summary.memory_updates, now)?;
    Ok(id)
}

/// One node by id.
pub fn by_id(conn: &Connection, id: NodeId) -> Result<SummaryNode> {
    let sql = format!("SELECT {} FROM summary_nodes n WHERE n.id = ?1", SummaryNode::COLUMNS);
    conn.prepare_cached(&sql)?
        .query_row([id], SummaryNode::from_row)
        .optional()?
        .ok_or_else(|| Error::NotFound(Missing::Node(id)))
}

/// The roots of a session's forest (nodes without a parent), in time order; only those of
/// `level` when given.
pub fn roots(conn: &Connection, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>> {
    let sql = format!(
        "SELECT {} FROM summary_nodes n
         WHERE n.session_id = ?1 AND n.parent_id IS NULL AND (?2 IS NULL OR n.level = ?2)
         ORDER BY n.first_seq",
        SummaryNode::COLUMNS
    );
    query_all(conn, &sql, params![session, level], SummaryNode::from_row)
}

/// Every node of a session, by level then position.
/// The first `raw-archive` node of a session (by level, then position), through the partial
/// index that holds only raw archives: nothing is read when there are none.
pub fn first_raw_archive(conn: &Connection, session: SessionId) -> Result<Option<SummaryNode>> {
    let sql = format!(
        "SELECT {} FROM summary_nodes n INDEXED BY summary_nodes_raw_archive
         WHERE n.session_id = ?1 AND n.summarizer = '{RAW_ARCHIVE}' ORDER BY n.level, n.first_seq LIMIT 1",
        SummaryNode::COLUMNS
    );
    Ok(conn.prepare_cached(&sql)?.query_row([session], SummaryNode::from_row).optional()?)
}

pub fn all(conn: &Connection, session: SessionId) -> Result<Vec<SummaryNode>> {
    let sql = format!(
        "SELECT {} FROM summary_nodes n WHERE n.session_id = ?1 ORDER BY n.level, n.first_seq",
        SummaryNode::COLUMNS
    );
    query_all(conn, &sql, [session], SummaryNode::from_row)
}

/// The children of a node, in time order (none for Level-0 nodes: their sources are messages).
pub fn children(conn: &Connection, id: NodeId) -> Result<Vec<SummaryNode>> {
    let sql = format!(
        "SELECT {} FROM summary_nodes n WHERE n.parent_id = ?1 ORDER BY n.first_seq",
        SummaryNode::COLUMNS
    );
    query_all(conn, &sql, [id], SummaryNode::from_row)
}

// The compactor's bookkeeping, behind `Backend`'s methods of the same names.

/// A session's failed summarizer calls in a row and whether it holds a raw archive, in one
/// read (the raw archives' partial index: nothing is read when there are none).
pub(crate) fn compaction_state(conn: &Connection, session: SessionId) -> Result<CompactionState> {
    let state: Option<(i64, bool)> = conn
        .prepare_cached(&format!(
            "SELECT s.summarizer_failures, EXISTS (
                 SELECT 1 FROM summary_nodes n INDEXED BY summary_nodes_raw_archive
                 WHERE n.session_id = s.id AND n.summarizer = '{RAW_ARCHIVE}')
             FROM sessions s WHERE s.id = ?1"
        ))?
        .query_row([session], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (failures, raw_archive) = state.ok_or(Error::NotFound(Missing::Session(session)))?;
    Ok(CompactionState { summarizer_failures: failures.clamp(0, i64::from(u32::MAX)) as u32, raw_archive })
}

/// Records the consecutive failed summarizer calls of a session (0 after a success).
pub(crate) fn set_summarizer_failures(store: &Store, session: SessionId, failures: u32) -> Result<()> {
    store.write(|tx| {
        tx.prepare_cached("UPDATE sessions SET summarizer_failures = ?2 WHERE id = ?1")?
            .execute(rusqlite::params![session, failures])?;
        Ok(())
    })
}

/// Counts one summary of `summarizer` refused by the quality gate for `reason`.
pub(crate) fn count_rejection(store: &Store, summarizer: &str, reason: &str) -> Result<()> {
    store.write(|tx| {
        tx.prepare_cached(
            "INSERT INTO summary_rejections (summarizer, reason, count, last_at) VALUES (?1, ?2, 1, ?3)
             ON CONFLICT (summarizer, reason) DO UPDATE SET count = count + 1, last_at = excluded.last_at",
        )?
        .execute(rusqlite::params![summarizer, reason, crate::types::to_unix(Utc::now())])?;
        Ok(())
    })
}
