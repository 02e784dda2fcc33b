//! The summary forest: Level-0 nodes over messages, level L+1 nodes over level-L nodes, and
//! the compactor's bookkeeping about it ([`Upkeep`]): consecutive summarizer failures per
//! session, summaries the quality gate refused per reason, and the raw archives waiting for a
//! real summary.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::CompactionState;
use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::queues;
use crate::store::Store;
use crate::types::{Level, NewSummary, NodeId, SessionId, SummaryNode, to_unix};

/// The rules every summary obeys, whatever stores it: a headline, a body and a summarizer's name.
pub fn validate(summary: &NewSummary) -> Result<()> {
    if summary.headline.trim().is_empty() {
        return Err(Error::invalid("headline", "a summary needs a headline"));
    }
    if summary.body.trim().is_empty() {
        return Err(Error::invalid("body", "a summary needs a body"));
    }
    if summary.summarizer.trim().is_empty() {
        return Err(Error::invalid("summarizer", "name the summarizer"));
    }
    Ok(())
}

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
    validate(summary)?;
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
    validate(summary)?;
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
    validate(summary)?;
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

/// The summarizer name of the flagged digests the compactor writes while the summarizer is
/// down. The store owns it because its partial index (`summary_nodes_raw_archive`, in both
/// backends' schemas) is on exactly this value: a statement must spell it literally, not bind
/// it, for the index to serve.
pub const RAW_ARCHIVE: &str = "raw-archive";

/// Where a new node goes, a leaf or a merge's parent ([`plan_merge`]), whatever stores it.
#[derive(Clone, Debug)]
pub struct NodePlace {
    /// The session.
    pub session: SessionId,
    /// The level: 0 for a leaf, one above the children's for a parent.
    pub level: Level,
    /// The first seq covered.
    pub first_seq: i64,
    /// The last seq covered.
    pub last_seq: i64,
    /// The earliest of the sources' times (UNIX seconds).
    pub start_time: f64,
    /// The latest of the sources' times (UNIX seconds).
    pub end_time: f64,
    /// The sources' tokens, together.
    pub source_token_count: i64,
}

/// The rules of a merge's children, whatever stores them: at least two distinct nodes of one
/// session and one level, none merged already ([`Error::AlreadyMerged`]). Returns them in
/// order and the parent's place; that they are adjacent roots is for the caller's query, whose
/// count [`check_adjacent`] judges.
pub fn plan_merge(mut nodes: Vec<SummaryNode>) -> Result<(Vec<SummaryNode>, NodePlace)> {
    if nodes.len() < 2 {
        return Err(Error::invalid("children", "a merge needs at least two nodes"));
    }
    nodes.sort_by_key(|node| node.first_seq);
    if nodes.windows(2).any(|pair| pair[0].id == pair[1].id) {
        return Err(Error::invalid("children", "a node is named twice"));
    }
    let (session, level) = (nodes[0].session_id, nodes[0].level);
    for node in &nodes {
        if node.session_id != session || node.level != level {
            return Err(Error::invalid("children", "nodes of one session and one level only"));
        }
        if let Some(parent) = node.parent_id {
            return Err(Error::AlreadyMerged { node: node.id, parent });
        }
    }
    let plan = NodePlace {
        session,
        level: level.up(),
        first_seq: nodes[0].first_seq,
        last_seq: nodes[nodes.len() - 1].last_seq,
        // Times may go backwards in a transcript (clock changes, imported merges): a node's
        // range is the min and max of its sources', never its first's start and last's end.
        start_time: nodes.iter().map(|node| to_unix(node.start_time)).fold(f64::INFINITY, f64::min),
        end_time: nodes.iter().map(|node| to_unix(node.end_time)).fold(f64::NEG_INFINITY, f64::max),
        source_token_count: nodes.iter().map(|node| i64::from(node.token_count)).sum(),
    };
    Ok((nodes, plan))
}

/// The second rule of a merge's children: no other root of their level lies between them.
/// `roots_between` is how many roots of the level start within the children's first seqs
/// (theirs included).
pub fn check_adjacent(roots_between: i64, children: &[SummaryNode]) -> Result<()> {
    if roots_between != children.len() as i64 {
        return Err(Error::invalid("children", "the nodes are not adjacent roots of their level"));
    }
    Ok(())
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
