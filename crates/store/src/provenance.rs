//! Where each memory came from, and its earlier versions (schema 12, `memory_versions`).
//!
//! An operator asking "why does the agent believe this?" needs the source of every memory: the
//! user (through which command), the agent (the session, message and tool call that saved
//! it), or a summary node's facts (the node and the messages it covers). Every write records
//! one, in the transaction of the write; an update keeps the earlier text as a closed version,
//! so no update loses what it replaced. Deleting a memory deletes its versions (a trigger), and
//! forgetting deletes the memories and versions that came from what it erases.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::Result;
use crate::types::{SessionId, from_unix, to_unix};
pub(crate) use strata_seam::memories::Source;
pub(crate) use strata_seam::memories::{MemoryVersion, Provenance};

/// The provenance columns of `memory_versions` (alias `v`), in [`provenance_from_row`]'s order.
const COLUMNS: &str =
    "v.source, v.via, v.session_id, v.node_id, v.first_seq, v.last_seq, v.message_id, v.tool_call_id";

fn provenance_from_row(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Provenance> {
    Ok(Provenance {
        source: Source::parse(&row.get::<_, String>(at)?),
        via: row.get(at + 1)?,
        session: row.get(at + 2)?,
        node: row.get(at + 3)?,
        first_seq: row.get(at + 4)?,
        last_seq: row.get(at + 5)?,
        message: row.get(at + 6)?,
        tool_call_id: row.get(at + 7)?,
    })
}

/// Records a new version of memory `id`: the current one (if any) is closed at `now`. A write
/// that changes neither title nor content records nothing. `since`, for a supersede, is when
/// the closed version stopped being true and the new one became true. Call in the write's
/// transaction.
pub(crate) fn record(
    conn: &Connection,
    id: i64,
    title: &str,
    content: &str,
    provenance: &Provenance,
    now: DateTime<Utc>,
    since: Option<DateTime<Utc>>,
) -> Result<()> {
    let current: Option<(String, String)> = conn
        .prepare_cached(
            "SELECT title, content FROM memory_versions WHERE memory_id = ?1 AND replaced_at IS NULL
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if current.as_ref().is_some_and(|(t, c)| t == title && c == content) {
        // The same text written again is true again, if it had ended.
        conn.prepare_cached(
            "UPDATE memory_versions SET valid_to = NULL WHERE memory_id = ?1 AND replaced_at IS NULL",
        )?
        .execute([id])?;
        return Ok(());
    }
    conn.prepare_cached(
        "UPDATE memory_versions SET replaced_at = ?2, valid_to = coalesce(?3, valid_to)
         WHERE memory_id = ?1 AND replaced_at IS NULL",
    )?
    .execute(params![id, to_unix(now), since.map(to_unix)])?;
    // A summary's facts name their node; its session and the messages it covers are read here.
    let mut provenance = provenance.clone();
    // A tool call without its message: the session's newest, the one that made the call when
    // the caller stored it first (as the chat loop does).
    if let (Source::Agent, Some(session), None) = (provenance.source, provenance.session, provenance.message)
    {
        provenance.message = conn
            .prepare_cached("SELECT id FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1")?
            .query_row([session], |row| row.get(0))
            .optional()?;
    }
    if let Some(node) = provenance.node {
        let found: Option<(SessionId, i64, i64)> = conn
            .prepare_cached("SELECT session_id, first_seq, last_seq FROM summary_nodes WHERE id = ?1")?
            .query_row([node], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .optional()?;
        if let Some((session, first, last)) = found {
            provenance.session = Some(session);
            provenance.first_seq = Some(first);
            provenance.last_seq = Some(last);
        }
    }
    conn.prepare_cached(
        "INSERT INTO memory_versions(memory_id, title, content, written_at, source, via, session_id, node_id,
                                     first_seq, last_seq, message_id, tool_call_id, valid_from)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        id,
        title,
        content,
        to_unix(now),
        provenance.source.as_str(),
        provenance.via,
        provenance.session,
        provenance.node,
        provenance.first_seq,
        provenance.last_seq,
        provenance.message,
        provenance.tool_call_id,
        since.map(to_unix),
    ])?;
    Ok(())
}

/// Writes a version as a copy brings it (`strata copy`): its times and source as they were.
pub(crate) fn insert_version(conn: &Connection, id: i64, version: &MemoryVersion) -> Result<()> {
    let provenance = &version.provenance;
    conn.prepare_cached(
        "INSERT INTO memory_versions(memory_id, title, content, written_at, replaced_at, source, via, session_id,
                                     node_id, first_seq, last_seq, message_id, tool_call_id, valid_from, valid_to)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
        id,
        version.title,
        version.content,
        to_unix(version.written_at),
        version.replaced_at.map(to_unix),
        provenance.source.as_str(),
        provenance.via,
        provenance.session,
        provenance.node,
        provenance.first_seq,
        provenance.last_seq,
        provenance.message,
        provenance.tool_call_id,
        to_unix(version.valid_from),
        version.valid_to.map(to_unix),
    ])?;
    Ok(())
}

/// The source of memory `id`'s current version.
pub(crate) fn current(conn: &Connection, id: i64) -> Result<Option<Provenance>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM memory_versions v WHERE v.memory_id = ?1 AND v.replaced_at IS NULL
             ORDER BY v.id DESC LIMIT 1"
        ))?
        .query_row([id], |row| provenance_from_row(row, 0))
        .optional()?)
}

/// Every version of memory `id`, newest first.
pub(crate) fn history(conn: &Connection, id: i64) -> Result<Vec<MemoryVersion>> {
    query_all(
        conn,
        &format!(
            "SELECT v.title, v.content, v.written_at, v.replaced_at, {VALIDITY}, {COLUMNS}
             FROM memory_versions v WHERE v.memory_id = ?1 ORDER BY v.id DESC"
        ),
        [id],
        version_from_row,
    )
}

/// When a version (alias `v`) was true: since the time a supersede gave or its writing, until
/// the time a supersede gave or its replacement (NULL: still true).
pub(crate) const VALIDITY: &str = "coalesce(v.valid_from, v.written_at), coalesce(v.valid_to, v.replaced_at)";

/// A version read as `v.title, v.content, v.written_at, v.replaced_at`, [`VALIDITY`], then the
/// provenance columns.
fn version_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryVersion> {
    Ok(MemoryVersion {
        title: row.get(0)?,
        content: row.get(1)?,
        written_at: from_unix(row.get(2)?),
        replaced_at: row.get::<_, Option<f64>>(3)?.map(from_unix),
        valid_from: from_unix(row.get(4)?),
        valid_to: row.get::<_, Option<f64>>(5)?.map(from_unix),
        provenance: provenance_from_row(row, 6)?,
    })
}

/// The version of each of a persona's memories that was true at `at` (one category only when
/// given), with its memory's id, category and key, by category then key; a memory written
/// after `at` has none.
pub(crate) fn true_at(
    conn: &Connection,
    persona: &str,
    category: Option<&str>,
    at: DateTime<Utc>,
) -> Result<Vec<(i64, String, String, MemoryVersion)>> {
    // Two versions true at once (a supersede dated before an ordinary update): the newer wins.
    let rows = query_all(
        conn,
        &format!(
            "SELECT v.title, v.content, v.written_at, v.replaced_at, {VALIDITY}, {COLUMNS},
                    m.id, m.category, m.key
             FROM agent_memories m JOIN memory_versions v ON v.memory_id = m.id
             WHERE m.role = ?1 AND (?2 IS NULL OR m.category = ?2)
               AND coalesce(v.valid_from, v.written_at) <= ?3
               AND (coalesce(v.valid_to, v.replaced_at) IS NULL OR coalesce(v.valid_to, v.replaced_at) > ?3)
             ORDER BY m.category, m.key, v.id DESC"
        ),
        params![persona, category, to_unix(at)],
        |row| {
            Ok((
                row.get::<_, i64>(14)?,
                row.get::<_, String>(15)?,
                row.get::<_, String>(16)?,
                version_from_row(row)?,
            ))
        },
    )?;
    let mut found: Vec<(i64, String, String, MemoryVersion)> = Vec::with_capacity(rows.len());
    for row in rows {
        if found.last().is_none_or(|last| last.0 != row.0) {
            found.push(row);
        }
    }
    Ok(found)
}

/// The versions whose source is session `session` (a tool call in it, or a node of it).
pub(crate) fn of_session(
    conn: &Connection,
    session: SessionId,
) -> Result<Vec<strata_seam::forgetting::SessionVersion>> {
    query_all(
        conn,
        "SELECT id, memory_id, node_id, message_id FROM memory_versions
         WHERE session_id = ?1 AND source IN ('agent', 'summary', 'proposal')",
        [session],
        |row| {
            Ok(strata_seam::forgetting::SessionVersion {
                version: row.get(0)?,
                memory: row.get(1)?,
                node: row.get(2)?,
                message: row.get(3)?,
            })
        },
    )
}
