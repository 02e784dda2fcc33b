//! Memories (one per category, key and persona, each with its source and every version it
//! had) and the queue of facts on their way to memory, with the proposals waiting for the user.

use chrono::{DateTime, Utc};
use strata_seam::backend::{
    check_merge, check_supersede, check_writer, fold, from_unix, to_unix, validate_memory,
};
use strata_seam::memories::{
    MemoryUpdate, MemoryVersion, MemoryWrite, Provenance, QueuedUpdate, UpdateId, Writer,
};
use strata_seam::{Category, Error, Memory, Missing};

use crate::db::{Queries, Tx, pg};
use crate::rows;

/// A persona's memories, optionally of one category.
pub(crate) fn list(
    db: &mut impl Queries,
    persona: &str,
    category: Option<Category>,
) -> Result<Vec<Memory>, Error> {
    let category = category.map(Category::as_str);
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE persona = $1 AND ($2::TEXT IS NULL OR category = $2)
         ORDER BY category, key",
        rows::MEMORY
    );
    Ok(db.query(&sql, &[&persona, &category]).map_err(pg)?.iter().map(rows::memory).collect())
}

/// Saves a memory (upsert by category, key and persona) with its source, keeping the text as a
/// version; says whether it is new, decided inside the transaction.
pub(crate) fn save(
    tx: &mut Tx<'_>,
    writer: Writer,
    persona: &str,
    memory: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<(Memory, bool), Error> {
    check_writer(writer, memory.category)?;
    strata_seam::backend::validate_persona(persona)?;
    validate_memory(memory)?;
    let source = source(tx, provenance)?;
    let folded = fold(&format!("{} {}: {}", memory.key, memory.title, memory.content));
    // `xmax = 0` holds for a row this statement inserted, not for one it updated.
    let sql = format!(
        "INSERT INTO agent_memories(persona, category, key, title, content, updated_at, folded, provenance)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (category, key, persona) DO UPDATE SET
             title = EXCLUDED.title, content = EXCLUDED.content, updated_at = EXCLUDED.updated_at,
             folded = EXCLUDED.folded, provenance = EXCLUDED.provenance, valid_from = NULL, valid_to = NULL
         RETURNING {}, (xmax = 0)",
        rows::MEMORY
    );
    let now = to_unix(now);
    let row = tx
        .query_one(
            &sql,
            &[
                &persona,
                &memory.category.as_str(),
                &memory.key,
                &memory.title,
                &memory.content,
                &now,
                &folded,
                &source,
            ],
        )
        .map_err(pg)?;
    let created: bool = row.get(10);
    let stored = rows::memory(&row);
    // As on SQLite, a write that changes neither title nor content records no version: the
    // same text written again is true again, if it had ended.
    let latest = tx
        .query_opt(
            "SELECT id, title, content FROM memory_versions WHERE memory_id = $1 ORDER BY id DESC LIMIT 1",
            &[&stored.id.0],
        )
        .map_err(pg)?
        .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1), row.get::<_, String>(2)));
    match latest {
        Some((version, title, content)) if title == memory.title && content == memory.content => {
            tx.execute("UPDATE memory_versions SET valid_to = NULL WHERE id = $1", &[&version])
                .map_err(pg)?;
        }
        _ => {
            tx.execute(
                "INSERT INTO memory_versions(memory_id, title, content, provenance, written_at)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&stored.id.0, &memory.title, &memory.content, &source, &now],
            )
            .map_err(pg)?;
        }
    }
    Ok((stored, created))
}

/// The provenance as stored: a fact consolidated from a summary names the messages that
/// summary covers.
fn source(tx: &mut Tx<'_>, provenance: &Provenance) -> Result<serde_json::Value, Error> {
    let mut provenance = provenance.clone();
    if let Some(node) = provenance.node
        && provenance.session.is_none()
        && let Some(row) = tx
            .query_opt("SELECT session_id, first_seq, last_seq FROM summary_nodes WHERE id = $1", &[&node.0])
            .map_err(pg)?
    {
        provenance.session = Some(strata_seam::SessionId(row.get(0)));
        provenance.first_seq = Some(row.get(1));
        provenance.last_seq = Some(row.get(2));
    }
    serde_json::to_value(&provenance)
        .map_err(|error| Error::Invalid { field: "provenance", reason: error.to_string() })
}

/// Supersedes a memory (see `Backend::supersede_memory`): the rules are the store's
/// ([`check_supersede`]); the current version is dated to `at`, and `with`, if given, becomes
/// the memory's text from `at` as a new version.
#[allow(clippy::too_many_arguments)]
pub(crate) fn supersede(
    tx: &mut Tx<'_>,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
    with: Option<&MemoryWrite<'_>>,
    at: DateTime<Utc>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory, Error> {
    check_writer(writer, category)?;
    let missing =
        || Error::NotFound(Missing::Memory { persona: persona.to_owned(), category, key: key.to_owned() });
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE persona = $1 AND category = $2 AND key = $3 FOR UPDATE",
        rows::MEMORY
    );
    let current = tx
        .query_opt(&sql, &[&persona, &category.as_str(), &key])
        .map_err(pg)?
        .map(|row| rows::memory(&row))
        .ok_or_else(missing)?;
    check_supersede(&current, with, at, now)?;
    let id = current.id.0;
    tx.execute(
        "UPDATE memory_versions SET valid_to = $2
         WHERE id = (SELECT max(id) FROM memory_versions WHERE memory_id = $1)",
        &[&id, &to_unix(at)],
    )
    .map_err(pg)?;
    match with {
        Some(with) => {
            let source = source(tx, provenance)?;
            let folded = fold(&format!("{} {}: {}", with.key, with.title, with.content));
            tx.execute(
                "UPDATE agent_memories SET title = $2, content = $3, updated_at = $4, folded = $5,
                     provenance = $6, valid_from = $7, valid_to = NULL
                 WHERE id = $1",
                &[&id, &with.title, &with.content, &to_unix(now), &folded, &source, &to_unix(at)],
            )
            .map_err(pg)?;
            tx.execute(
                "INSERT INTO memory_versions(memory_id, title, content, provenance, written_at, valid_from)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[&id, &with.title, &with.content, &source, &to_unix(now), &to_unix(at)],
            )
            .map_err(pg)?;
        }
        None => {
            tx.execute("UPDATE agent_memories SET valid_to = $2 WHERE id = $1", &[&id, &to_unix(at)])
                .map_err(pg)?;
        }
    }
    let sql = format!("SELECT {} FROM agent_memories WHERE id = $1", rows::MEMORY);
    Ok(rows::memory(&tx.query_one(&sql, &[&id]).map_err(pg)?))
}

/// Merges the memory `(category, key)` into `into`: the merged one ends now, `into` takes its
/// new text (see `Backend::merge_memory`); the rules are strata-store's `check_merge`.
pub(crate) fn merge(
    tx: &mut Tx<'_>,
    persona: &str,
    category: Category,
    key: &str,
    into: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory, Error> {
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE persona = $1 AND category = $2 AND key = $3 FOR UPDATE",
        rows::MEMORY
    );
    let target = tx
        .query_opt(&sql, &[&persona, &into.category.as_str(), &into.key])
        .map_err(pg)?
        .map(|row| rows::memory(&row));
    check_merge(persona, category, key, into, target.as_ref())?;
    supersede(tx, Writer::User, persona, category, key, None, now, provenance, now)?;
    Ok(save(tx, Writer::User, persona, into, provenance, now)?.0)
}

/// A persona's memories as they were at `at`: the version of each true then (the newer when
/// two were), with its dates; a version without a supersede's date was true from its writing
/// until the next version's.
pub(crate) fn list_as_of(
    db: &mut impl Queries,
    persona: &str,
    category: Option<Category>,
    at: DateTime<Utc>,
) -> Result<Vec<Memory>, Error> {
    let category = category.map(Category::as_str);
    let rows = db
        .query(
            "SELECT DISTINCT ON (category, key)
                    id, category, key, title, content, written_at, persona, provenance, since, until
             FROM (SELECT m.id, m.category, m.key, v.title, v.content, v.written_at, m.persona,
                          v.provenance, v.id AS version, coalesce(v.valid_from, v.written_at) AS since,
                          coalesce(v.valid_to,
                                   lead(v.written_at) OVER (PARTITION BY v.memory_id ORDER BY v.id)) AS until
                   FROM agent_memories m JOIN memory_versions v ON v.memory_id = m.id
                   WHERE m.persona = $1 AND ($2::TEXT IS NULL OR m.category = $2)) versions
             WHERE since <= $3 AND (until IS NULL OR until > $3)
             ORDER BY category, key, version DESC",
            &[&persona, &category, &to_unix(at)],
        )
        .map_err(pg)?;
    Ok(rows.iter().map(rows::memory).collect())
}

/// Every version of a memory, newest first; each was replaced when the next was written.
pub(crate) fn history(
    tx: &mut Tx<'_>,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<Vec<MemoryVersion>, Error> {
    let rows = tx
        .query(
            "SELECT v.title, v.content, v.written_at, v.provenance, v.valid_from, v.valid_to
             FROM memory_versions v JOIN agent_memories m ON m.id = v.memory_id
             WHERE m.persona = $1 AND m.category = $2 AND m.key = $3 ORDER BY v.id DESC",
            &[&persona, &category.as_str(), &key],
        )
        .map_err(pg)?;
    let mut replaced_at = None;
    Ok(rows
        .iter()
        .map(|row| {
            let written_at = from_unix(row.get(2));
            let version = MemoryVersion {
                title: row.get(0),
                content: row.get(1),
                written_at,
                replaced_at,
                valid_from: row.get::<_, Option<f64>>(4).map_or(written_at, from_unix),
                valid_to: row.get::<_, Option<f64>>(5).map(from_unix).or(replaced_at),
                provenance: serde_json::from_value(row.get(3)).unwrap_or_else(|_| Provenance::unknown()),
            };
            replaced_at = Some(written_at);
            version
        })
        .collect())
}

/// Deletes one memory with its vector; returns whether it existed.
pub(crate) fn delete(
    tx: &mut Tx<'_>,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<bool, Error> {
    check_writer(writer, category)?;
    let ids: Vec<i64> = tx
        .query(
            "DELETE FROM agent_memories WHERE persona = $1 AND category = $2 AND key = $3 RETURNING id",
            &[&persona, &category.as_str(), &key],
        )
        .map_err(pg)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    forget_vectors(tx, &ids)?;
    Ok(!ids.is_empty())
}

/// Deletes the memories of `category` not written since `cutoff`, with their vectors.
pub(crate) fn purge(tx: &mut Tx<'_>, category: Category, cutoff: DateTime<Utc>) -> Result<usize, Error> {
    let ids: Vec<i64> = tx
        .query(
            "DELETE FROM agent_memories WHERE category = $1 AND updated_at < $2 RETURNING id",
            &[&category.as_str(), &to_unix(cutoff)],
        )
        .map_err(pg)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    forget_vectors(tx, &ids)?;
    Ok(ids.len())
}

/// A deleted memory's vectors and place in the backlog go with it.
fn forget_vectors(tx: &mut Tx<'_>, ids: &[i64]) -> Result<(), Error> {
    tx.execute("DELETE FROM embeddings WHERE kind = 'memory' AND item_id = ANY($1)", &[&ids]).map_err(pg)?;
    tx.execute("DELETE FROM embedding_backlog WHERE kind = 'memory' AND item_id = ANY($1)", &[&ids])
        .map_err(pg)?;
    Ok(())
}

/// Turns a pending fact into the persona's open proposal for `key`, replacing an older one.
pub(crate) fn propose(
    tx: &mut Tx<'_>,
    id: UpdateId,
    key: &str,
    title: &str,
    content: &str,
) -> Result<(), Error> {
    let category: Option<String> = tx
        .query_opt("SELECT category FROM memory_updates WHERE id = $1", &[&id.0])
        .map_err(pg)?
        .map(|row| row.get(0));
    let category = category.and_then(|name| name.parse().ok()).unwrap_or(Category::UserPreferences);
    // A proposal obeys the rules of the memory it would become, so accepting never fails.
    validate_memory(&MemoryWrite { category, key, title, content })?;
    tx.execute(
        "DELETE FROM memory_updates WHERE state = 'proposed' AND key = $2
             AND persona = (SELECT persona FROM memory_updates WHERE id = $1)",
        &[&id.0, &key],
    )
    .map_err(pg)?;
    tx.execute(
        "UPDATE memory_updates SET state = 'proposed', key = $2, title = $3, content = $4
         WHERE id = $1 AND state = 'pending'",
        &[&id.0, &key, &title, &content],
    )
    .map_err(pg)?;
    Ok(())
}

/// Proposes a preference the user stated in a message just appended, with no node, replacing
/// the persona's open proposal of the same key.
pub(crate) fn propose_stated(
    tx: &mut Tx<'_>,
    persona: &str,
    update: &MemoryUpdate,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    // A proposal obeys the rules of the memory it would become, so accepting never fails.
    validate_memory(&MemoryWrite {
        category: update.category,
        key: &update.key,
        title: &update.title,
        content: &update.content,
    })?;
    tx.execute(
        "DELETE FROM memory_updates WHERE state = 'proposed' AND persona = $1 AND key = $2",
        &[&persona, &update.key],
    )
    .map_err(pg)?;
    tx.execute(
        "INSERT INTO memory_updates(persona, node_id, category, key, title, content, state, created_at)
         VALUES ($1, NULL, $2, $3, $4, $5, 'proposed', $6)",
        &[&persona, &update.category.as_str(), &update.key, &update.title, &update.content, &to_unix(now)],
    )
    .map_err(pg)?;
    Ok(())
}

/// A persona's open proposals, oldest first.
pub(crate) fn proposals(db: &mut impl Queries, persona: &str) -> Result<Vec<QueuedUpdate>, Error> {
    let sql = format!(
        "SELECT {} FROM memory_updates WHERE state = 'proposed' AND persona = $1 ORDER BY id",
        rows::UPDATE
    );
    Ok(db.query(&sql, &[&persona]).map_err(pg)?.iter().map(rows::update).collect())
}

/// Removes the persona's proposal for `key` and returns it; [`Error::NotFound`] if none.
pub(crate) fn take_proposal(tx: &mut Tx<'_>, persona: &str, key: &str) -> Result<QueuedUpdate, Error> {
    let sql = format!(
        "DELETE FROM memory_updates WHERE state = 'proposed' AND persona = $1 AND key = $2 RETURNING {}",
        rows::UPDATE
    );
    tx.query_opt(&sql, &[&persona, &key]).map_err(pg)?.map(|row| rows::update(&row)).ok_or_else(|| {
        Error::NotFound(Missing::Proposal { persona: persona.to_owned(), key: key.to_owned() })
    })
}
