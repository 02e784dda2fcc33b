//! The `memory_updates` queue (schema 7): facts a summarizer found, waiting to be settled into
//! `agent_memories`, and proposed preferences waiting for the user.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::memories::{self, MemoryWrite};
use crate::provenance::Provenance;
use crate::store::Store;
use crate::types::{Category, Memory, MemoryUpdate, NodeId, QueuedUpdate, UpdateId, Writer, to_unix};

/// Queues the facts found by the summary of `node`, for the persona of its session. Call in
/// the transaction that writes the node.
pub fn queue(conn: &Connection, node: NodeId, updates: &[MemoryUpdate], now: DateTime<Utc>) -> Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let mut insert = conn.prepare_cached(
        "INSERT INTO memory_updates(role, node_id, category, key, title, content, created_at)
         SELECT s.role, n.id, ?2, ?3, ?4, ?5, ?6
         FROM summary_nodes n JOIN sessions s ON s.id = n.session_id WHERE n.id = ?1",
    )?;
    for update in updates {
        insert.execute(params![
            node,
            update.category.as_str(),
            update.key,
            update.title,
            update.content,
            to_unix(now)
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
/// proposal of the same key. `key`, `title` and `content` are the checked forms.
pub fn propose(conn: &Connection, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()> {
    // A proposal obeys the rules of the preference it would become, so accepting never fails.
    memories::validate(&MemoryWrite { category: Category::UserPreferences, key, title, content })?;
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

/// The user accepts a proposal: it becomes their `user_preferences` memory, and the proposal
/// is gone. Both in the caller's transaction.
pub fn accept(conn: &Connection, persona: &str, key: &str, now: DateTime<Utc>) -> Result<Memory> {
    let found = proposal(conn, persona, key)?;
    let write = MemoryWrite {
        category: Category::UserPreferences,
        key: &found.update.key,
        title: &found.update.title,
        content: &found.update.content,
    };
    let provenance = Provenance::proposal(found.node_id);
    let (memory, _) = memories::upsert(conn, Writer::User, persona, &write, &provenance, now)?;
    conn.prepare_cached("DELETE FROM memory_updates WHERE id = ?1")?.execute([found.id])?;
    Ok(memory)
}

/// The user rejects a proposal; it is deleted.
pub fn reject(conn: &Connection, persona: &str, key: &str) -> Result<QueuedUpdate> {
    let found = proposal(conn, persona, key)?;
    conn.prepare_cached("DELETE FROM memory_updates WHERE id = ?1")?.execute([found.id])?;
    Ok(found)
}

/// The queue of facts on their way to memory, over one [`Store`] ([`Store::memory_updates`]):
/// recall settles what summarizers found, and the application shows the user the preferences
/// proposed to them.
#[derive(Clone, Copy, Debug)]
pub struct MemoryUpdates<'a> {
    store: &'a Store,
}

impl Store {
    /// The queue of facts on their way to memory (schema 7).
    pub fn memory_updates(&self) -> MemoryUpdates<'_> {
        MemoryUpdates { store: self }
    }
}

impl MemoryUpdates<'_> {
    /// Up to `limit` facts found by summarizers and not yet settled, oldest first.
    pub fn pending(&self, limit: usize) -> Result<Vec<QueuedUpdate>> {
        self.store.read(|conn| pending(conn, limit))
    }

    /// Removes a fact from the queue once it is applied (or refused by the memory rules).
    /// Settling twice is harmless.
    pub fn settle(&self, id: UpdateId) -> Result<()> {
        self.store.write(|tx| settle(tx, id))
    }

    /// Turns a queued preference into the persona's open proposal for `key` (replacing an older
    /// one), with the checked key, title and content.
    pub fn propose_preference(&self, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()> {
        self.store.write(|tx| propose(tx, id, key, title, content))
    }

    /// A persona's open preference proposals, oldest first.
    pub fn proposals(&self, persona: &str) -> Result<Vec<QueuedUpdate>> {
        self.store.read(|conn| proposals(conn, persona))
    }

    /// The user accepts a proposal: in one transaction it becomes their `user_preferences`
    /// memory and leaves the queue. [`Error::NotFound`] if there is no such proposal.
    pub fn accept(&self, persona: &str, key: &str) -> Result<Memory> {
        self.store.write(|tx| accept(tx, persona, key, Utc::now()))
    }

    /// The user rejects a proposal; returns it. [`Error::NotFound`] if there is none.
    pub fn reject(&self, persona: &str, key: &str) -> Result<QueuedUpdate> {
        self.store.write(|tx| reject(tx, persona, key))
    }
}
