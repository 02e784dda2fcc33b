//! Forgetting: the one path that deletes messages, and everything derived from them, in one
//! transaction, so that the bytes leave the file.
//!
//! A person may ask to be forgotten (a persona), a conversation may have to go (a session), or
//! its beginning (a session's messages before a time). What is derived from the messages goes
//! with them: the summary nodes over them, their vectors and full-text entries, the facts and
//! proposals queued from those nodes, the memories of a forgotten persona, import records and
//! backlog rows. A Level-0 node that also covers kept messages is rewritten from what remains
//! (by the caller's summarizer, see [`Rebuilt`], or as a marker the compactor summarizes again
//! later, being a `raw-archive`); a node above it summarized forgotten text too, so it is
//! dissolved: its surviving children become roots again and the next compaction merges them.
//! A memory that other sources also wrote is rewritten from their versions alone: its text is
//! the newest kept version's, and a key or title only the erased text gave it (a twin update
//! keeps the memory's label) is replaced by the one its kept writer proposed, in every kept
//! version too (`rewrite_memory`).
//!
//! Messages are append-only for every other path: the SQL guard (schema 12) lets a delete of
//! `messages` through only while the transaction holds an open audit row in `forgets`, and a
//! deferred foreign key makes a transaction that leaves it open unable to commit.
//!
//! Bytes: every connection runs with `PRAGMA secure_delete` (freed cells and pages are
//! zeroed, so no earlier version of a row lingers in a page's free space either), the trigram indexes delete with FTS5's `secure-delete` option (their entries are
//! removed from the index pages, not only marked deleted), the contentless word indexes, whose
//! deletes only leave tombstones, are merged (`optimize`) so the deleted words leave their
//! segments, and after the commit the WAL is checkpointed and truncated, so the old page
//! images leave the `-wal` too.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::provenance;
use crate::search::HitKind;
use crate::search::index::Deferred;
use crate::sessions::validate_persona;
use crate::store::Store;
use crate::types::{NewSummary, NodeId, SessionId, to_unix};
use crate::vectors;
pub(crate) use strata_seam::forgetting::{
    Cut, ForgetCounts, ForgetPlan, ForgetRecord, ForgetScope, Forgotten, KeptSpan, Rebuilt, SessionPart,
    withdrawn,
};

/// Messages deleted per statement: the progress callback hears of each batch.
const BATCH: i64 = 2_000;

fn cuts(conn: &Connection, scope: &ForgetScope) -> Result<Vec<Cut>> {
    let session_by_key = |key: &str| -> Result<(SessionId, String)> {
        conn.prepare_cached("SELECT id, role FROM sessions WHERE key = ?1")?
            .query_row([key], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?
            .ok_or_else(|| Error::NotFound(Missing::SessionKey(key.to_owned())))
    };
    match scope {
        ForgetScope::Persona { persona } => {
            validate_persona(persona)?;
            let sessions =
                query_all(conn, "SELECT id FROM sessions WHERE role = ?1 ORDER BY id", [persona], |row| {
                    row.get::<_, SessionId>(0)
                })?;
            let memories: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM agent_memories WHERE role = ?1)
                         OR EXISTS (SELECT 1 FROM memory_updates WHERE role = ?1)",
                )?
                .query_row([persona], |row| row.get(0))?;
            if sessions.is_empty() && !memories {
                return Err(Error::invalid("persona", format!("{persona:?} holds nothing to forget")));
            }
            Ok(sessions
                .into_iter()
                .map(|session| Cut { session, persona: persona.clone(), cut: i64::MAX, whole: true })
                .collect())
        }
        ForgetScope::Session { key } => {
            let (session, persona) = session_by_key(key)?;
            Ok(vec![Cut { session, persona, cut: i64::MAX, whole: true }])
        }
        ForgetScope::SessionBefore { key, before } => {
            let (session, persona) = session_by_key(key)?;
            // The first message sent at or after `before`; when there is none, every message
            // goes and the session numbers on after them.
            let cut: i64 = conn
                .prepare_cached(
                    "SELECT COALESCE(
                         (SELECT MIN(seq) FROM messages WHERE session_id = ?1 AND created_at >= ?2),
                         (SELECT MAX(seq) + 1 FROM messages WHERE session_id = ?1),
                         (SELECT first_seq FROM sessions WHERE id = ?1))",
                )?
                .query_row(params![session, to_unix(*before)], |row| row.get(0))?;
            Ok(vec![Cut { session, persona, cut, whole: false }])
        }
    }
}

/// The ids of the vectors of `ids` (rows of `kind`), read from sqlite-vec's rowid table: a
/// row's chunk `c` is vector `id * MAX_CHUNKS + c`.
fn vector_rowids(conn: &Connection, kind: HitKind, ids: &[i64]) -> Result<Vec<i64>> {
    if vectors::space(conn)?.is_none() {
        return Ok(Vec::new());
    }
    let chunks = vectors::MAX_CHUNKS as i64;
    let mut find = conn.prepare_cached(&format!(
        "SELECT rowid FROM {}_rowids WHERE rowid BETWEEN ?1 AND ?2",
        vectors::table(kind)
    ))?;
    let mut rowids = Vec::new();
    for &id in ids {
        for rowid in find.query_map(params![id * chunks, id * chunks + chunks - 1], |row| row.get(0))? {
            rowids.push(rowid?);
        }
    }
    Ok(rowids)
}

fn delete_vectors(conn: &Connection, kind: HitKind, ids: &[i64]) -> Result<u64> {
    let rowids = vector_rowids(conn, kind, ids)?;
    if rowids.is_empty() {
        return Ok(0);
    }
    for &rowid in &rowids {
        vectors::delete_chunk(conn, kind, rowid)?;
    }
    Ok(rowids.len() as u64)
}

fn ids(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<Vec<i64>> {
    query_all(conn, sql, params, |row| row.get(0))
}

fn session_part(conn: &Connection, cut: &Cut, whole_persona: bool) -> Result<SessionPart> {
    let nodes: Vec<(i64, i64, i64)> = query_all(
        conn,
        "SELECT id, level, last_seq FROM summary_nodes WHERE session_id = ?1 AND first_seq < ?2",
        params![cut.session, cut.cut],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
    )?;
    let messages = ids(
        conn,
        "SELECT id FROM messages WHERE session_id = ?1 AND seq < ?2",
        params![cut.session, cut.cut],
    )?;
    let versions = provenance::of_session(conn, cut.session)?;
    let mut all_versions = conn.prepare_cached("SELECT id FROM memory_versions WHERE memory_id = ?1")?;
    SessionPart::decide(cut, whole_persona, nodes, messages, &versions, &mut |memory| {
        Ok(all_versions.query_map([memory], |row| row.get(0))?.collect::<rusqlite::Result<_>>()?)
    })
}

/// Earlier (replaced) versions of these memories: deleted with them.
fn earlier_versions(conn: &Connection, memories: &[i64]) -> Result<u64> {
    count_in(
        conn,
        "SELECT count(*) FROM memory_versions WHERE memory_id = ?1 AND replaced_at IS NOT NULL",
        memories,
    )
}

/// Deletes memories (their versions, full-text entries and backlog rows go by trigger) and
/// their vectors.
fn delete_memories(conn: &Connection, memories: &[i64]) -> Result<()> {
    if memories.is_empty() {
        return Ok(());
    }
    delete_vectors(conn, HitKind::Memory, memories)?;
    // One statement, so FTS5 applies its secure deletes once.
    let ids =
        serde_json::to_string(memories).map_err(|error| Error::invalid("memory ids", error.to_string()))?;
    conn.prepare_cached("DELETE FROM agent_memories WHERE id IN (SELECT value FROM json_each(?1))")?
        .execute([ids])?;
    Ok(())
}

fn count_in(conn: &Connection, sql: &str, ids: &[i64]) -> Result<u64> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut total = 0u64;
    for &id in ids {
        total += statement.query_row([id], |row| row.get::<_, i64>(0))? as u64;
    }
    Ok(total)
}

/// The plan: what would go. Read inside the forget's own transaction too, so what it erases
/// is what it counted.
fn plan(conn: &Connection, scope: &ForgetScope) -> Result<(ForgetPlan, Vec<(Cut, SessionPart)>)> {
    let mut counts = ForgetCounts::default();
    let mut rebuild = Vec::new();
    let mut parts = Vec::new();
    for cut in cuts(conn, scope)? {
        let part = session_part(conn, &cut, matches!(scope, ForgetScope::Persona { .. }))?;
        counts.sessions += u64::from(cut.whole);
        counts.messages += part.messages.len() as u64;
        counts.summaries += part.doomed_nodes.len() as u64;
        counts.vectors += vector_rowids(conn, HitKind::Message, &part.messages)?.len() as u64;
        let mut nodes = part.doomed_nodes.clone();
        nodes.extend(part.partial.iter().map(|span| span.node.0));
        counts.vectors += vector_rowids(conn, HitKind::Summary, &nodes)?.len() as u64;
        counts.proposals += count_in(conn, "SELECT count(*) FROM memory_updates WHERE node_id = ?1", &nodes)?;
        counts.memories += part.memories.len() as u64;
        counts.memory_versions += part.versions.len() as u64 + earlier_versions(conn, &part.memories)?;
        counts.vectors += vector_rowids(conn, HitKind::Memory, &part.memories)?.len() as u64;
        counts.ingests +=
            conn.prepare_cached("SELECT count(*) FROM ingests WHERE session_id = ?1 AND first_seq < ?2")?
                .query_row(params![cut.session, cut.cut], |row| row.get::<_, i64>(0))? as u64;
        if let Some(span) = &part.partial {
            counts.rebuilt += 1;
            rebuild.push(span.clone());
        }
        parts.push((cut, part));
    }
    if let ForgetScope::Persona { persona } = scope {
        let memories = ids(conn, "SELECT id FROM agent_memories WHERE role = ?1", [persona])?;
        // Those a session's part counted already are not counted twice.
        let counted: HashSet<i64> =
            parts.iter().flat_map(|(_, part)| part.memories.iter().copied()).collect();
        let memories: Vec<i64> = memories.into_iter().filter(|id| !counted.contains(id)).collect();
        counts.memories += memories.len() as u64;
        counts.memory_versions += earlier_versions(conn, &memories)?;
        counts.vectors += vector_rowids(conn, HitKind::Memory, &memories)?.len() as u64;
        // Facts queued from the persona's nodes were counted with them.
        counts.proposals += conn
            .prepare_cached("SELECT count(*) FROM memory_updates WHERE role = ?1 AND node_id IS NULL")?
            .query_row([persona], |row| row.get::<_, i64>(0))? as u64;
    }
    Ok((ForgetPlan { scope: scope.clone(), counts, rebuild }, parts))
}

/// Turns FTS5's `secure-delete` option on or off for the full-text tables of messages and
/// summaries while forgetting (the memories' trigram index has it always, schema 12).
fn secure_fts_deletes(conn: &Connection, on: bool) -> Result<()> {
    for table in Deferred::ALL.into_iter().flat_map(Deferred::indexes) {
        conn.execute(
            &format!("INSERT INTO {table}({table}, rank) VALUES ('secure-delete', ?1)"),
            [on as i64],
        )?;
    }
    Ok(())
}

/// Rewrites a Level-0 node over the messages it keeps (`span`), after the older ones were
/// deleted: its text, range, times and source tokens. It becomes a root (its parent was
/// dissolved), and the facts of its new summary are queued.
fn rewrite_leaf(conn: &Connection, span: &KeptSpan, summary: &NewSummary, now: DateTime<Utc>) -> Result<()> {
    if summary.headline.trim().is_empty() || summary.body.trim().is_empty() || summary.summarizer.is_empty() {
        return Err(Error::invalid("summary", "a rebuilt summary needs a headline, a body and a summarizer"));
    }
    conn.prepare_cached(
        "UPDATE summary_nodes SET headline = ?2, body = ?3, token_count = ?4, summarizer = ?5,
                first_seq = ?6, parent_id = NULL,
                start_time = (SELECT MIN(created_at) FROM messages WHERE summary_id = ?1),
                end_time = (SELECT MAX(created_at) FROM messages WHERE summary_id = ?1),
                source_token_count = (SELECT COALESCE(SUM(token_count), 0) FROM messages WHERE summary_id = ?1)
         WHERE id = ?1",
    )?
    .execute(params![span.node, summary.headline, summary.body, summary.token_count, summary.summarizer, span.first_seq])?;
    crate::queues::queue(conn, span.node, &summary.memory_updates, now)
}

/// One version of a memory, as [`rewrite_memory`] reads it.
struct Version {
    id: i64,
    title: String,
    content: String,
    written_at: f64,
    via: Option<String>,
}

/// Rewrites memory `memory` from its versions that stay, after those in `gone` (from what a
/// forget erases) go: its text becomes the newest kept version's, and a label (key, title)
/// that only erased text gave it is replaced by the one its kept writer proposed, in the
/// memory and in every kept version, so none of the erased text stays in a kept row. A kept
/// version written under the memory's own key and title keeps them: that text is its own.
fn rewrite_memory(conn: &Connection, memory: i64, gone: &HashSet<i64>) -> Result<()> {
    let versions = query_all(
        conn,
        "SELECT id, title, content, written_at, via FROM memory_versions WHERE memory_id = ?1 ORDER BY id",
        [memory],
        |row| {
            Ok(Version {
                id: row.get(0)?,
                title: row.get(1)?,
                content: row.get(2)?,
                written_at: row.get(3)?,
                via: row.get(4)?,
            })
        },
    )?;
    let (erased, kept): (Vec<Version>, Vec<Version>) =
        versions.into_iter().partition(|version| gone.contains(&version.id));
    let Some(newest) = kept.last() else {
        return delete_memories(conn, &[memory]);
    };
    let erased_titles: HashSet<&str> = erased.iter().map(|version| version.title.as_str()).collect();
    // Titles and keys kept versions wrote themselves (not merged into this memory as a twin).
    let own = |version: &&Version| strata_seam::maintenance::proposed_label(version.via.as_deref()).is_none();
    let own_titles: HashSet<&str> = kept.iter().filter(own).map(|version| version.title.as_str()).collect();
    let (category, key, persona): (String, String, String) = conn
        .prepare_cached("SELECT category, key, role FROM agent_memories WHERE id = ?1")?
        .query_row([memory], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    // The key is the erased text's unless a kept version was written under it; then the
    // earliest kept writer's proposal names the memory (suffixed when a live memory has it).
    let key = match kept.iter().find(|version| !own(version)) {
        Some(first) if !kept.iter().any(|version| own(&version)) => {
            let (proposed, _) =
                strata_seam::maintenance::proposed_label(first.via.as_deref()).expect("a merged version");
            let taken: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM agent_memories
                                    WHERE category = ?1 AND key = ?2 AND role = ?3 AND id <> ?4)",
                )?
                .query_row(params![category, proposed, persona, memory], |row| row.get(0))?;
            if taken { format!("{proposed}_{memory}") } else { proposed.to_owned() }
        }
        _ => key,
    };
    let mut title = newest.title.clone();
    let mut retitle = conn.prepare_cached("UPDATE memory_versions SET title = ?2 WHERE id = ?1")?;
    for version in &kept {
        let Some((_, proposed)) = strata_seam::maintenance::proposed_label(version.via.as_deref()) else {
            continue;
        };
        if erased_titles.contains(version.title.as_str()) && !own_titles.contains(version.title.as_str()) {
            retitle.execute(params![version.id, proposed])?;
            if version.id == newest.id {
                title = proposed.to_owned();
            }
        }
    }
    let mut drop_version = conn.prepare_cached("DELETE FROM memory_versions WHERE id = ?1")?;
    for version in &erased {
        drop_version.execute([version.id])?;
    }
    // The newest kept version is the memory's current one again, with its dates: true since it
    // became true, and still true unless it ended before anything replaced it.
    conn.prepare_cached(
        "UPDATE memory_versions SET valid_to = CASE WHEN replaced_at IS NULL THEN valid_to END,
             replaced_at = NULL
         WHERE id = ?1",
    )?
    .execute([newest.id])?;
    conn.prepare_cached(
        "UPDATE agent_memories SET key = ?2, title = ?3, content = ?4, updated_at = ?5,
             valid_from = (SELECT valid_from FROM memory_versions WHERE id = ?6),
             valid_to = (SELECT valid_to FROM memory_versions WHERE id = ?6)
         WHERE id = ?1",
    )?
    .execute(params![memory, key, title, newest.content, newest.written_at, newest.id])?;
    // Its vectors embedded the erased text: the memory is embedded again from what it keeps.
    delete_vectors(conn, HitKind::Memory, &[memory])?;
    conn.prepare_cached("INSERT OR IGNORE INTO embedding_backlog(kind, item_id) VALUES ('memory', ?1)")?
        .execute([memory])?;
    Ok(())
}

/// Erases one session's part. Returns whether its partial node got a marker.
fn erase_session(
    conn: &Connection,
    cut: &Cut,
    part: &SessionPart,
    rebuilt: &HashMap<NodeId, &Rebuilt>,
    reindex: bool,
    now: DateTime<Utc>,
    progress: &mut dyn FnMut(u64),
) -> Result<bool> {
    let (session, seq) = (cut.session, cut.cut);
    let mut nodes = part.doomed_nodes.clone();
    nodes.extend(part.partial.iter().map(|span| span.node.0));
    // Facts queued from these nodes came from the forgotten text.
    let mut drop_updates = conn.prepare_cached("DELETE FROM memory_updates WHERE node_id = ?1")?;
    for &node in &nodes {
        drop_updates.execute([node])?;
    }
    delete_vectors(conn, HitKind::Message, &part.messages)?;
    delete_vectors(conn, HitKind::Summary, &nodes)?;
    let mut unqueue =
        conn.prepare_cached("DELETE FROM embedding_backlog WHERE kind = ?1 AND item_id = ?2")?;
    for &id in &part.messages {
        unqueue.execute(params!["message", id])?;
    }
    for &id in &part.doomed_nodes {
        unqueue.execute(params!["summary", id])?;
    }
    // Dissolve the nodes above forgotten text: their children become roots.
    conn.prepare_cached(
        "UPDATE summary_nodes SET parent_id = NULL
         WHERE session_id = ?1 AND parent_id IN (SELECT id FROM summary_nodes WHERE session_id = ?1 AND first_seq < ?2)",
    )?
    .execute(params![session, seq])?;
    // The messages, in batches of seqs, with their full-text entries (the trigram index needs
    // the text it indexed to delete it; rows past the cursor were never indexed).
    let indexed = Deferred::Messages.tail_condition("id");
    let unindex_trigrams = format!(
        "INSERT INTO messages_fts(messages_fts, rowid, content)
         SELECT 'delete', id, content FROM messages
         WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 AND NOT ({indexed})"
    );
    let unindex_words = format!(
        "DELETE FROM messages_words WHERE rowid IN (SELECT id FROM messages
         WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 AND NOT ({indexed}))"
    );
    let (first, last): (Option<i64>, Option<i64>) = conn
        .prepare_cached("SELECT MIN(seq), MAX(seq) FROM messages WHERE session_id = ?1 AND seq < ?2")?
        .query_row(params![session, seq], |row| Ok((row.get(0)?, row.get(1)?)))?;
    if let (Some(first), Some(last)) = (first, last) {
        let mut from = first;
        while from <= last {
            let to = (from + BATCH).min(last + 1);
            // A forget that rebuilds the indexes afterwards leaves the entries to the rebuild.
            if !reindex {
                conn.prepare_cached(&unindex_trigrams)?.execute(params![session, from, to])?;
                conn.prepare_cached(&unindex_words)?.execute(params![session, from, to])?;
            }
            let deleted = conn
                .prepare_cached("DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3")?
                .execute(params![session, from, to])?;
            progress(deleted as u64);
            from = to;
        }
    }
    // The nodes, in one statement: their full-text entries go by trigger, and FTS5 applies
    // its secure deletes once per statement (one statement per node took minutes for 3,000).
    conn.prepare_cached(
        "DELETE FROM summary_nodes WHERE session_id = ?1 AND first_seq < ?2 AND id IS NOT ?3",
    )?
    .execute(params![session, seq, part.partial.as_ref().map(|span| span.node)])?;
    delete_memories(conn, &part.memories)?;
    let gone: HashSet<i64> = part.versions.iter().copied().collect();
    for &memory in &part.rewrites {
        rewrite_memory(conn, memory, &gone)?;
    }
    let mut marked = false;
    if let Some(span) = &part.partial {
        let summary = match rebuilt.get(&span.node).filter(|done| done.span == *span) {
            Some(done) => done.summary.clone(),
            None => {
                marked = true;
                withdrawn(span, part.messages.len(), now)
            }
        };
        rewrite_leaf(conn, span, &summary, now)?;
    }
    let ingests = if cut.whole {
        "DELETE FROM ingests WHERE session_id = ?1"
    } else {
        "DELETE FROM ingests WHERE session_id = ?1 AND first_seq < ?2"
    };
    if cut.whole {
        conn.prepare_cached(ingests)?.execute([session])?;
        conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")?.execute([session])?;
    } else {
        conn.prepare_cached(ingests)?.execute(params![session, seq])?;
        conn.prepare_cached("UPDATE sessions SET first_seq = ?2 WHERE id = ?1")?
            .execute(params![session, seq])?;
    }
    Ok(marked)
}

fn erase(
    conn: &Connection,
    scope: &ForgetScope,
    command: &str,
    rebuilt: &[Rebuilt],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Forgotten> {
    let now = Utc::now();
    let (plan, parts) = plan(conn, scope)?;
    let (persona, key, before) = match scope {
        ForgetScope::Persona { persona } => (Some(persona.clone()), None, None),
        ForgetScope::Session { key } => (parts.first().map(|(cut, _)| cut.persona.clone()), Some(key), None),
        ForgetScope::SessionBefore { key, before } => {
            (parts.first().map(|(cut, _)| cut.persona.clone()), Some(key), Some(to_unix(*before)))
        }
    };
    // The audit row opens the guard of `messages` (see the module's doc and schema 12).
    let audit: i64 = conn
        .prepare_cached(
            "INSERT INTO forgets(command, scope, persona, session_key, before, started_at, open)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1) RETURNING id",
        )?
        .query_row(params![command, scope.name(), persona, key, before, to_unix(now)], |row| row.get(0))?;
    let reindex = plan.counts.messages >= REBUILD_FROM;
    secure_fts_deletes(conn, !reindex)?;
    let rebuilt: HashMap<NodeId, &Rebuilt> = rebuilt.iter().map(|done| (done.span.node, done)).collect();
    let total = plan.counts.messages;
    let mut done = 0u64;
    let mut markers = 0u64;
    for (cut, part) in &parts {
        let mut heard = |deleted: u64| {
            done += deleted;
            progress(done, total);
        };
        markers += u64::from(erase_session(conn, cut, part, &rebuilt, reindex, now, &mut heard)?);
    }
    if let ForgetScope::Persona { persona } = scope {
        let memories = ids(conn, "SELECT id FROM agent_memories WHERE role = ?1", [persona])?;
        delete_memories(conn, &memories)?;
        conn.prepare_cached("DELETE FROM memory_updates WHERE role = ?1")?.execute([persona])?;
    }
    secure_fts_deletes(conn, false)?;
    if reindex {
        for deferred in Deferred::ALL {
            deferred.rebuild(conn)?;
        }
    } else {
        // The word indexes are contentless: a delete leaves a tombstone, and the postings (the
        // words) stay in their segments until a merge. An `optimize` merges each into one
        // segment without the deleted rows, now.
        for deferred in Deferred::ALL {
            let words = deferred.indexes()[1];
            conn.execute(&format!("INSERT INTO {words}({words}) VALUES ('optimize')"), [])?;
        }
    }
    conn.execute("INSERT INTO memories_words(memories_words) VALUES ('optimize')", [])?;
    let counts = plan.counts;
    conn.prepare_cached(
        "UPDATE forgets SET sessions = ?2, messages = ?3, summaries = ?4, rebuilt = ?5, memories = ?6,
                memory_versions = ?7, proposals = ?8, vectors = ?9, ingests = ?10, finished_at = ?11, open = NULL
         WHERE id = ?1",
    )?
    .execute(params![
        audit,
        counts.sessions as i64,
        counts.messages as i64,
        counts.summaries as i64,
        counts.rebuilt as i64,
        counts.memories as i64,
        counts.memory_versions as i64,
        counts.proposals as i64,
        counts.vectors as i64,
        counts.ingests as i64,
        to_unix(Utc::now()),
    ])?;
    Ok(Forgotten { audit, counts, markers, wal_truncated: false })
}

impl Store {
    /// What [`Store::forget`] would erase, without changing anything (`--dry-run`).
    pub fn forget_plan(&self, scope: &ForgetScope) -> Result<ForgetPlan> {
        self.read(|conn| {
            let snapshot = conn.unchecked_transaction()?;
            Ok(plan(&snapshot, scope)?.0)
        })
    }

    /// Erases what `scope` names, in one transaction (see the module's doc); `command` is
    /// recorded in the audit row (`forgets`), with the counts and the time, and no content.
    /// `rebuilt` holds the summaries the caller wrote for the [`ForgetPlan::rebuild`] spans;
    /// a span without one (or one that changed meanwhile) gets a marker. `progress` hears
    /// (messages deleted, messages to delete) after each batch.
    pub fn forget(
        &self,
        scope: &ForgetScope,
        command: &str,
        rebuilt: &[Rebuilt],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Forgotten> {
        let mut conn = self.pool.get()?;
        // Every connection deletes securely (`db.rs`); said again here, since this is the path
        // that relies on it.
        conn.pragma_update(None, "secure_delete", true)?;
        let result = self.write_on(&mut conn, |tx| erase(tx, scope, command, rebuilt, progress));
        let truncated = match &result {
            // The old page images are in the WAL until a checkpoint copies the new ones over
            // them; TRUNCATE then empties it. A reader holding an old snapshot makes it
            // incomplete (busy = 1): the next checkpoint finishes the job.
            Ok(_) => conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get::<_, i64>(0))
                .map(|busy| busy == 0)
                .unwrap_or(false),
            Err(_) => false,
        };
        result.map(|forgotten| Forgotten { wal_truncated: truncated, ..forgotten })
    }

    /// Every forget recorded, oldest first.
    pub fn forgets(&self) -> Result<Vec<ForgetRecord>> {
        self.read(|conn| {
            query_all(
                conn,
                "SELECT id, command, scope, persona, session_key, before, sessions, messages, summaries,
                        rebuilt, memories, memory_versions, proposals, vectors, ingests, finished_at
                 FROM forgets ORDER BY id",
                [],
                |row| {
                    let count = |index: usize| row.get::<_, i64>(index).map(|n| n as u64);
                    Ok(ForgetRecord {
                        id: row.get(0)?,
                        command: row.get(1)?,
                        scope: row.get(2)?,
                        persona: row.get(3)?,
                        session_key: row.get(4)?,
                        before: row.get::<_, Option<f64>>(5)?.map(crate::types::from_unix),
                        counts: ForgetCounts {
                            sessions: count(6)?,
                            messages: count(7)?,
                            summaries: count(8)?,
                            rebuilt: count(9)?,
                            memories: count(10)?,
                            memory_versions: count(11)?,
                            proposals: count(12)?,
                            vectors: count(13)?,
                            ingests: count(14)?,
                        },
                        finished_at: row.get::<_, Option<f64>>(15)?.map(crate::types::from_unix),
                    })
                },
            )
        })
    }
}

/// From this many messages on, a forget rebuilds the search indexes from what remains instead
/// of deleting each row's entries securely: FTS5's secure delete seeks every term of every
/// row (forgetting 50,000 of 100,000 messages ran for over ten minutes), a rebuild reads the
/// kept rows once.
const REBUILD_FROM: u64 = 1_000;
