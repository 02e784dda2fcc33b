//! Agent memories: the user's `agent_memories` table, isolated per persona, and when a memory
//! expires ([`MemoryTtls`]).

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::provenance::{self, MemoryVersion, Provenance};
use crate::search::HitKind;
use crate::types::FromRow;
use crate::types::{Category, Memory, Writer, to_unix};
use crate::vectors;
use strata_seam::backend::validate_persona;
pub(crate) use strata_seam::backend::{check_merge, check_supersede, check_writer};
pub(crate) use strata_seam::memories::MemoryWrite;

/// Inserts or replaces the memory `(category, key)` of a persona; returns it and whether it is
/// new. Call inside an immediate transaction, so that "new" is the truth even when several
/// writers race for the same key.
pub fn upsert(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    memory: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<(Memory, bool)> {
    check_writer(writer, memory.category)?;
    validate_persona(persona)?;
    strata_seam::backend::validate_memory(memory)?;
    let existed: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM agent_memories WHERE category = ?1 AND key = ?2 AND role = ?3)",
        )?
        .query_row(params![memory.category.as_str(), memory.key, persona], |row| row.get(0))?;
    // The stored vector no longer matches new text: clear it; the backlog trigger re-queues it.
    let sql = format!(
        "INSERT INTO agent_memories(category, key, title, content, updated_at, role)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(category, key, role) DO UPDATE SET
             title = excluded.title, content = excluded.content,
             updated_at = excluded.updated_at, embedding = NULL, valid_from = NULL, valid_to = NULL
         RETURNING {}",
        Memory::COLUMNS
    );
    let mut stored = conn.prepare_cached(&sql)?.query_row(
        params![memory.category.as_str(), memory.key, memory.title, memory.content, to_unix(now), persona],
        Memory::from_row,
    )?;
    provenance::record(conn, stored.id.0, memory.title, memory.content, provenance, now, None)?;
    stored.provenance = provenance::current(conn, stored.id.0)?;
    Ok((stored, !existed))
}

/// Supersedes the memory `(category, key)` of a persona: its text stopped being true at `at`,
/// and `with` (if given) is true from then on. The old text stays a version, dated; without
/// `with` the memory stays, ended, for history and search. Call inside an immediate
/// transaction.
#[allow(clippy::too_many_arguments)]
pub fn supersede(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
    with: Option<&MemoryWrite<'_>>,
    at: DateTime<Utc>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory> {
    check_writer(writer, category)?;
    let current = get(conn, persona, category, key)?.ok_or_else(|| missing(persona, category, key))?;
    check_supersede(&current, with, at, now)?;
    match with {
        Some(with) => {
            conn.prepare_cached(
                "UPDATE agent_memories SET title = ?2, content = ?3, updated_at = ?4, embedding = NULL,
                     valid_from = ?5, valid_to = NULL
                 WHERE id = ?1",
            )?
            .execute(params![
                current.id.0,
                with.title,
                with.content,
                to_unix(now),
                to_unix(at)
            ])?;
            provenance::record(conn, current.id.0, with.title, with.content, provenance, now, Some(at))?;
        }
        None => {
            conn.prepare_cached("UPDATE agent_memories SET valid_to = ?2 WHERE id = ?1")?
                .execute(params![current.id.0, to_unix(at)])?;
            conn.prepare_cached(
                "UPDATE memory_versions SET valid_to = ?2 WHERE memory_id = ?1 AND replaced_at IS NULL",
            )?
            .execute(params![current.id.0, to_unix(at)])?;
        }
    }
    get(conn, persona, category, key)?.ok_or_else(|| missing(persona, category, key))
}

/// Merges the memory `(category, key)` of a persona into `into` (the user's command, for two
/// memories of one meaning under two keys): the merged memory ends now, its text kept as a
/// dated version (history and search see it as a past fact), and `into` takes its new text as
/// a version whose provenance names the merge. Call inside an immediate transaction, so both
/// happen or neither.
pub fn merge(
    conn: &Connection,
    persona: &str,
    category: Category,
    key: &str,
    into: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory> {
    let target = get(conn, persona, into.category, into.key)?;
    check_merge(persona, category, key, into, target.as_ref())?;
    supersede(conn, Writer::User, persona, category, key, None, now, provenance, now)?;
    Ok(upsert(conn, Writer::User, persona, into, provenance, now)?.0)
}

/// The memories of a persona as they were at `at`: each one's text then, with its dates and
/// source; a memory written later is left out. By category then key; one category when given.
pub fn list_as_of(
    conn: &Connection,
    persona: &str,
    category: Option<Category>,
    at: DateTime<Utc>,
) -> Result<Vec<Memory>> {
    Ok(provenance::true_at(conn, persona, category.map(Category::as_str), at)?
        .into_iter()
        .filter_map(|(id, category, key, version)| {
            Some(Memory {
                id: crate::types::MemoryId(id),
                category: category.parse().ok()?,
                key,
                title: version.title,
                content: version.content,
                updated_at: version.written_at,
                persona: persona.to_owned(),
                provenance: Some(version.provenance),
                valid_from: version.valid_from,
                valid_to: version.valid_to,
            })
        })
        .collect())
}

/// One memory of a persona.
pub fn get(conn: &Connection, persona: &str, category: Category, key: &str) -> Result<Option<Memory>> {
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE role = ?1 AND category = ?2 AND key = ?3",
        Memory::COLUMNS
    );
    let found = conn
        .prepare_cached(&sql)?
        .query_row(params![persona, category.as_str(), key], Memory::from_row)
        .optional()?;
    found.map(|memory| with_provenance(conn, memory)).transpose()
}

fn with_provenance(conn: &Connection, mut memory: Memory) -> Result<Memory> {
    memory.provenance = provenance::current(conn, memory.id.0)?;
    Ok(memory)
}

/// Every version of a memory of a persona, newest first (the current one first); empty when
/// there is no such memory.
pub fn history(
    conn: &Connection,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<Vec<MemoryVersion>> {
    match get(conn, persona, category, key)? {
        Some(memory) => provenance::history(conn, memory.id.0),
        None => Ok(Vec::new()),
    }
}

/// The memories of a persona, by category then key; one category only when given.
pub fn list(conn: &Connection, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE role = ?1 AND (?2 IS NULL OR category = ?2)
         ORDER BY category, key",
        Memory::COLUMNS
    );
    query_all(conn, &sql, params![persona, category.map(Category::as_str)], Memory::from_row)?
        .into_iter()
        .map(|memory| with_provenance(conn, memory))
        .collect()
}

/// Deletes a memory (and its vector). Returns whether it existed.
pub fn delete(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<bool> {
    check_writer(writer, category)?;
    let id: Option<i64> = conn
        .prepare_cached(
            "DELETE FROM agent_memories WHERE role = ?1 AND category = ?2 AND key = ?3 RETURNING id",
        )?
        .query_row(params![persona, category.as_str(), key], |row| row.get(0))
        .optional()?;
    if let Some(id) = id {
        vectors::forget(conn, HitKind::Memory, id)?;
    }
    Ok(id.is_some())
}

/// Deletes the memories of `category` last written before `cutoff`; returns how many.
pub fn purge_older_than(conn: &Connection, category: Category, cutoff: DateTime<Utc>) -> Result<usize> {
    let ids: Vec<i64> = conn
        .prepare_cached("DELETE FROM agent_memories WHERE category = ?1 AND updated_at < ?2 RETURNING id")?
        .query_map(params![category.as_str(), to_unix(cutoff)], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for &id in &ids {
        vectors::forget(conn, HitKind::Memory, id)?;
    }
    Ok(ids.len())
}

fn missing(persona: &str, category: Category, key: &str) -> Error {
    Error::NotFound(Missing::Memory { persona: persona.to_owned(), category, key: key.to_owned() })
}
