//! `strata copy` into a SQLite file: a whole database (PostgreSQL's, or another file's) written
//! into an empty file exactly, every row with its id, in one transaction, so the file holds the
//! whole copy or nothing. With PostgreSQL's one-snapshot [`Source`], this is a fleet's backup
//! without `pg_dump`.

use chrono::Utc;
use rusqlite::{Transaction, params};

use crate::dump::{Source, StoredMemory};
use crate::error::{Error, Result};
use crate::search::HitKind;
use crate::store::Store;
use crate::vectors::{self, MAX_CHUNKS};
pub(crate) use strata_seam::backend::to_unix;
pub(crate) use strata_seam::transfer::Copied;

/// Rows a batch reads from the source.
const BATCH: usize = 2_000;

impl Store {
    /// Fills this database, which must hold no session, with everything `dump` reads;
    /// `progress` hears each table's name and the rows copied so far. One transaction: an
    /// error leaves the file as empty as it was.
    pub fn copy_from(&self, dump: &dyn Source, mut progress: impl FnMut(&str, u64)) -> Result<Copied> {
        let copied = self.write(|tx| {
            let sessions: i64 = tx.query_row("SELECT count(*) FROM sessions", [], |row| row.get(0))?;
            if sessions > 0 {
                return Err(Error::invalid(
                    "copy target",
                    format!("it already holds {sessions} sessions; copy into a new file"),
                ));
            }
            load(tx, dump, &mut progress)
        })?;
        // The copied rows are indexed for search now, not by the first bot that searches.
        strata_seam::Search::catch_up_search_index(self)?;
        Ok(copied)
    }
}

fn load(tx: &Transaction<'_>, dump: &dyn Source, progress: &mut dyn FnMut(&str, u64)) -> Result<Copied> {
    let mut copied = Copied::default();
    let mut insert = tx.prepare(
        "INSERT INTO sessions(id, key, role, created_at, last_active_at, last_bootstrap_at, summarizer_failures)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for stored in dump.sessions()? {
        let session = &stored.session;
        insert.execute(params![
            session.id.0,
            session.key,
            session.persona,
            to_unix(session.created_at),
            to_unix(session.last_active_at),
            session.last_bootstrap_at.map(to_unix),
            stored.summarizer_failures,
        ])?;
        copied.sessions += 1;
    }
    progress("sessions", copied.sessions);

    // Nodes without their parents first (a parent's id is above its children's), then the
    // parents, as a merge writes them.
    let mut insert = tx.prepare(
        "INSERT INTO summary_nodes(id, session_id, level, headline, body, first_seq, last_seq, start_time,
                                   end_time, token_count, source_token_count, summarizer, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    let mut parents = Vec::new();
    let mut after = 0;
    loop {
        let nodes = dump.nodes(after, BATCH)?;
        let Some(last) = nodes.last() else { break };
        after = last.id.0;
        for node in &nodes {
            insert.execute(params![
                node.id.0,
                node.session_id.0,
                node.level.0,
                node.headline,
                node.body,
                node.first_seq,
                node.last_seq,
                to_unix(node.start_time),
                to_unix(node.end_time),
                node.token_count,
                node.source_token_count,
                node.summarizer,
                to_unix(node.created_at),
            ])?;
            parents.extend(node.parent_id.map(|parent| (node.id.0, parent.0)));
            copied.nodes += 1;
        }
        progress("summary nodes", copied.nodes);
    }
    let mut parent = tx.prepare("UPDATE summary_nodes SET parent_id = ?2 WHERE id = ?1")?;
    for (id, parent_id) in parents {
        parent.execute(params![id, parent_id])?;
    }

    let mut insert = tx.prepare(
        "INSERT INTO messages(id, session_id, seq, role, content, tool_calls, tool_call_id, name, created_at,
                              token_count, pinned, summary_id, external_id, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    let mut after = 0;
    loop {
        let messages = dump.messages(after, BATCH)?;
        let Some(last) = messages.last() else { break };
        after = last.message.id.0;
        for stored in &messages {
            let message = &stored.message;
            insert.execute(params![
                message.id.0,
                message.session_id.0,
                message.seq,
                message.role.as_str(),
                message.content,
                message.tool_calls.as_ref().map(|calls| calls.to_string()),
                message.tool_call_id,
                message.name,
                stored.created_at_seconds,
                message.token_count,
                message.pinned,
                message.summary_id.map(|node| node.0),
                stored.external_id,
                message.body,
            ])?;
            copied.messages += 1;
        }
        progress("messages", copied.messages);
    }
    // A session numbers on from its first kept message (`forget --before` may have taken
    // the ones before it).
    tx.execute(
        "UPDATE sessions SET first_seq = COALESCE((SELECT MIN(seq) FROM messages m WHERE m.session_id = sessions.id), 0)",
        [],
    )?;

    for stored in dump.memories()? {
        copy_memory(tx, &stored)?;
        copied.memories += 1;
    }
    progress("memories", copied.memories);

    let mut insert = tx.prepare(
        "INSERT INTO memory_updates(id, role, node_id, category, key, title, content, state, created_at, edit)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for update in dump.queued()? {
        insert.execute(params![
            update.id.0,
            update.persona,
            update.node_id.map(|node| node.0),
            update.update.category.as_str(),
            update.update.key,
            update.update.title,
            update.update.content,
            if update.proposed { "proposed" } else { "pending" },
            to_unix(update.created_at),
            update.update.edit.map(|edit| edit.as_str()),
        ])?;
        copied.queued += 1;
    }

    crate::usage::insert_calls(tx, &dump.llm_calls()?)?;
    let mut insert = tx.prepare(
        "INSERT INTO summary_rejections(summarizer, reason, count, last_at) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (summarizer, reason, count) in dump.rejections()? {
        insert.execute(params![
            summarizer,
            reason,
            count.min(i64::MAX as u64) as i64,
            to_unix(Utc::now())
        ])?;
    }
    if let Some(encoding) = dump.token_encoding()? {
        tx.execute("INSERT INTO token_encoding(id, encoding) VALUES (1, ?1)", [encoding])?;
    }

    if let Some(space) = dump.space()? {
        vectors::use_space(tx, &space)?;
        vectors::ensure_floats(tx)?;
        for kind in HitKind::ALL {
            let mut after = None;
            loop {
                let batch = dump.vectors(kind, after, BATCH)?;
                let Some(last) = batch.last() else { break };
                after = Some((last.item_id, last.chunk));
                for stored in &batch {
                    if stored.chunk >= MAX_CHUNKS || stored.vector.len() != space.dimensions {
                        return Err(Error::invalid(
                            "copied vector",
                            format!(
                                "{kind:?} {} chunk {} has {} dimensions; the space has {} and {MAX_CHUNKS} chunks",
                                stored.item_id,
                                stored.chunk,
                                stored.vector.len(),
                                space.dimensions
                            ),
                        ));
                    }
                    vectors::insert_chunk(tx, kind, stored.item_id, stored.chunk, &stored.vector)?;
                    copied.vectors += 1;
                }
                progress("vectors", copied.vectors);
            }
        }
    }

    // The backlog as the source has it (the inserts above queued every row): rows copied with
    // their vectors wait for nothing, and a row rewritten since its vector still waits.
    tx.execute("DELETE FROM embedding_backlog", [])?;
    let mut insert = tx.prepare("INSERT INTO embedding_backlog(kind, item_id) VALUES (?1, ?2)")?;
    for (kind, id) in dump.backlog()? {
        insert.execute(params![kind.as_str(), id])?;
        copied.backlog += 1;
    }
    Ok(copied)
}

/// A memory and every version it had, as the source holds them.
fn copy_memory(tx: &Transaction<'_>, stored: &StoredMemory) -> Result<()> {
    let memory = &stored.memory;
    tx.prepare_cached(
        "INSERT INTO agent_memories(id, category, key, title, content, updated_at, role, valid_from, valid_to)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        memory.id.0,
        memory.category.as_str(),
        memory.key,
        memory.title,
        memory.content,
        to_unix(memory.updated_at),
        memory.persona,
        to_unix(memory.valid_from),
        memory.valid_to.map(to_unix),
    ])?;
    for version in &stored.versions {
        crate::provenance::insert_version(tx, memory.id.0, version)?;
    }
    Ok(())
}

/// Copies the database `source` reads ([`Maintenance::read_dump`]) into the new SQLite file
/// `dest` in one transaction: the backup of a backend without a file of its own (PostgreSQL's
/// [`Maintenance::backup`]). On failure the file and its companions are removed, so no half
/// copy is left.
///
/// [`Maintenance::read_dump`]: strata_seam::Maintenance::read_dump
/// [`Maintenance::backup`]: strata_seam::Maintenance::backup
pub fn backup_into<S>(source: &S, dest: &std::path::Path) -> Result<()>
where
    S: strata_seam::maintenance::Maintenance + ?Sized,
{
    if dest.exists() {
        return Err(Error::Invalid {
            field: "backup",
            reason: format!("{} exists; a backup goes into a new file", dest.display()),
        });
    }
    let copied =
        Store::open(dest).and_then(|target| source.read_dump(&mut |dump| target.copy_from(dump, |_, _| {})));
    if copied.is_err() {
        for suffix in ["", "-wal", "-shm", "-commits"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", dest.display()));
        }
    }
    copied.map(drop)
}
