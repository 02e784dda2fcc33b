//! The `memory_updates` queue (schema 7): facts a summarizer found, waiting to be settled into
//! `agent_memories`, and proposed preferences waiting for the user.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::agent_memories::{self, MemoryWrite};
use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::types::FromRow;
use crate::types::{Category, Memory, MemoryUpdate, NodeId, QueuedUpdate, UpdateId, Writer, to_unix};

/// Queues the facts found by the summary of `node`, for the persona of its session. Call in
/// the transaction that writes the node.
pub fn queue(conn: &Connection, node: NodeId, updates: &[MemoryUpdate], now: DateTime<Utc>) -> Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let mut insert = conn.prepare_cached(
        "INSERT INTO memory_updates(role, node_id, category, key, title, content, created_at, edit)
         SELECT s.role, n.id, ?2, ?3, ?4, ?5, ?6, ?7
         FROM summary_nodes n JOIN sessions s ON s.id = n.session_id WHERE n.id = ?1",
    )?;
    for update in updates {
        insert.execute(params![
            node,
            update.category.as_str(),
            update.key,
            update.title,
            update.content,
            to_unix(now),
            update.edit.map(|edit| edit.as_str()),
        ])?;
    }
    Ok(())
}

/// The oldest facts not yet settled, of every persona.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<QueuedUpdate>> {
    let sql = format!(
        "SELECT {} FROM memory_updates INDEXED BY memory_updates_pending
         WHERE state = 'pending' ORDER BY id LIMIT ?1",
        QueuedUpdate::COLUMNS
    );
    query_all(conn, &sql, [limit as i64], QueuedUpdate::from_row)
}

/// Removes a settled (applied or dropped) fact from the queue.
pub fn settle(conn: &Connection, id: UpdateId) -> Result<()> {
    conn.prepare_cached("DELETE FROM memory_updates WHERE id = ?1 AND state = 'pending'")?.execute([id])?;
    Ok(())
}

/// Turns a pending fact into the persona's open proposal for its key, replacing an older
/// proposal of the same key: a preference the user states, or an update consolidation would
/// not apply blindly (it dropped too much of the memory). `key`, `title` and `content` are the
/// checked forms.
pub fn propose(conn: &Connection, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()> {
    let category: Option<String> = conn
        .prepare_cached("SELECT category FROM memory_updates WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()?;
    let category = category.and_then(|name| name.parse().ok()).unwrap_or(Category::UserPreferences);
    // A proposal obeys the rules of the memory it would become, so accepting never fails.
    strata_seam::backend::validate_memory(&MemoryWrite { category, key, title, content })?;
    conn.prepare_cached(
        "DELETE FROM memory_updates WHERE state = 'proposed' AND key = ?2
             AND role = (SELECT role FROM memory_updates WHERE id = ?1)",
    )?
    .execute(params![id, key])?;
    conn.prepare_cached(
        "UPDATE memory_updates SET state = 'proposed', key = ?2, title = ?3, content = ?4
         WHERE id = ?1 AND state = 'pending'",
    )?
    .execute(params![id, key, title, content])?;
    Ok(())
}

/// Proposes a preference the user stated in a message just appended, before any summary found
/// it (so with no node), replacing the persona's open proposal of the same key. The summary
/// that later finds the same statement replaces this proposal in turn ([`propose`]): one
/// proposal per key, never two.
pub fn propose_stated(
    conn: &Connection,
    persona: &str,
    update: &MemoryUpdate,
    now: DateTime<Utc>,
) -> Result<()> {
    // A proposal obeys the rules of the memory it would become, so accepting never fails.
    strata_seam::backend::validate_memory(&MemoryWrite {
        category: update.category,
        key: &update.key,
        title: &update.title,
        content: &update.content,
    })?;
    conn.prepare_cached("DELETE FROM memory_updates WHERE state = 'proposed' AND role = ?1 AND key = ?2")?
        .execute(params![persona, update.key])?;
    conn.prepare_cached(
        "INSERT INTO memory_updates(role, node_id, category, key, title, content, state, created_at)
         VALUES (?1, NULL, ?2, ?3, ?4, ?5, 'proposed', ?6)",
    )?
    .execute(params![
        persona,
        update.category.as_str(),
        update.key,
        update.title,
        update.content,
        to_unix(now)
    ])?;
    Ok(())
}

/// The open proposals of a persona, oldest first.
pub fn proposals(conn: &Connection, persona: &str) -> Result<Vec<QueuedUpdate>> {
    let sql = format!(
        "SELECT {} FROM memory_updates WHERE state = 'proposed' AND role = ?1 ORDER BY id",
        QueuedUpdate::COLUMNS
    );
    query_all(conn, &sql, [persona], QueuedUpdate::from_row)
}

fn proposal(conn: &Connection, persona: &str, key: &str) -> Result<QueuedUpdate> {
    let sql = format!(
        "SELECT {} FROM memory_updates WHERE state = 'proposed' AND role = ?1 AND key = ?2",
        QueuedUpdate::COLUMNS
    );
    conn.prepare_cached(&sql)?
        .query_row(params![persona, key], QueuedUpdate::from_row)
        .optional()?
        .ok_or_else(|| {
            Error::NotFound(Missing::Proposal { persona: persona.to_owned(), key: key.to_owned() })
        })
}

/// The user accepts a proposal: it becomes their memory of its category (a preference, or the
/// update consolidation held back), and the proposal is gone. Both in the caller's transaction.
pub fn accept(conn: &Connection, persona: &str, key: &str, now: DateTime<Utc>) -> Result<Memory> {
    let found = proposal(conn, persona, key)?;
    let (write, provenance) = strata_seam::backend::accepted_proposal(&found);
    let (memory, _) = agent_memories::upsert(conn, Writer::User, persona, &write, &provenance, now)?;
    conn.prepare_cached("DELETE FROM memory_updates WHERE id = ?1")?.execute([found.id])?;
    Ok(memory)
}

/// The user rejects a proposal; it is deleted.
pub fn reject(conn: &Connection, persona: &str, key: &str) -> Result<QueuedUpdate> {
    let found = proposal(conn, persona, key)?;
    conn.prepare_cached("DELETE FROM memory_updates WHERE id = ?1")?.execute([found.id])?;
    Ok(found)
}
