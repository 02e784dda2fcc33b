//! `strata copy`: a database (a SQLite file or another PostgreSQL) moved into PostgreSQL
//! exactly and resumably.
//!
//! Exactly: every row keeps its id (a tool answer, a memory's source and a bot's own records
//! name rows by id), messages keep their coverage and keys, nodes their parents, memories every
//! version, the queue its facts and proposals, the usage its calls, and vectors are copied, not
//! computed again (a year's archive would take hours to embed). Resumably: each table goes in
//! batches of their own transactions, in id order, each skipping what the target holds, so a
//! copy cut short (a crash, a lost connection) is finished by running it again. The target
//! must be empty or a copy of the same file (`strata_copy` names the file).

use chrono::Utc;
use pgvector::Vector;
use strata_seam::backend::{fold, to_unix};
use strata_seam::search::HitKind;
use strata_seam::transfer::{Copied, Source, StoredMemory};
use strata_seam::{Error, NewMessage};
use strata_store::kinds::Kind;

use crate::db::{Queries, Tx, pg};
use crate::rows::MessageColumns;
use crate::{PgStore, vectors};

/// Rows a batch carries.
const BATCH: usize = 2_000;

impl PgStore {
    /// Copies the database `dump` reads (named `name`, for the record: a file's path or a
    /// url without its password) into this one; `progress` hears each table's name and the
    /// rows copied so far.
    pub fn copy_from(
        &self,
        dump: &dyn Source,
        name: &str,
        mut progress: impl FnMut(&str, u64),
    ) -> Result<Copied, Error> {
        self.write(|tx| claim(tx, name))?;
        let mut copied = Copied::default();

        let sessions = dump.sessions()?;
        self.write(|tx| {
            for stored in &sessions {
                let session = &stored.session;
                tx.execute(
                    "INSERT INTO sessions(id, key, persona, created_at, last_active_at, last_bootstrap_at,
                                          summarizer_failures)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
                    &[
                        &session.id.0,
                        &session.key,
                        &session.persona,
                        &to_unix(session.created_at),
                        &to_unix(session.last_active_at),
                        &session.last_bootstrap_at.map(to_unix),
                        &(stored.summarizer_failures.min(i32::MAX as u32) as i32),
                    ],
                )
                .map_err(pg)?;
            }
            Ok(())
        })?;
        copied.sessions = sessions.len() as u64;
        progress("sessions", copied.sessions);

        // Nodes first without their parents (a parent's id is above its children's), then
        // the parents: a merged node's parent is written once, as a merge writes it.
        let mut after = self.write(|tx| max_id(tx, "summary_nodes"))?;
        loop {
            let nodes = dump.nodes(after, BATCH)?;
            let Some(last) = nodes.last() else { break };
            after = last.id.0;
            self.write(|tx| {
                for node in &nodes {
                    tx.execute(
                        "INSERT INTO summary_nodes(id, session_id, persona, level, headline, body, first_seq,
                                                   last_seq, start_time, end_time, token_count, source_token_count,
                                                   summarizer, created_at, folded)
                         SELECT $1, $2, s.persona, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
                         FROM sessions s WHERE s.id = $2
                         ON CONFLICT (id) DO NOTHING",
                        &[
                            &node.id.0,
                            &node.session_id.0,
                            &(node.level.0 as i32),
                            &node.headline,
                            &node.body,
                            &node.first_seq,
                            &node.last_seq,
                            &to_unix(node.start_time),
                            &to_unix(node.end_time),
                            &(node.token_count as i32),
                            &(node.source_token_count as i32),
                            &node.summarizer,
                            &to_unix(node.created_at),
                            &fold(&format!("{}\n{}", node.headline, node.body)),
                        ],
                    )
                    .map_err(pg)?;
                }
                Ok(())
            })?;
            progress("summary nodes", after as u64);
        }
        let mut after = 0;
        loop {
            let nodes = dump.nodes(after, BATCH)?;
            let Some(last) = nodes.last() else { break };
            after = last.id.0;
            let (ids, parents): (Vec<i64>, Vec<i64>) =
                nodes.iter().filter_map(|node| Some((node.id.0, node.parent_id?.0))).unzip();
            self.write(|tx| {
                tx.execute(
                    "UPDATE summary_nodes n SET parent_id = v.parent
                     FROM unnest($1::BIGINT[], $2::BIGINT[]) AS v(id, parent)
                     WHERE n.id = v.id AND n.parent_id IS NULL",
                    &[&ids, &parents],
                )
                .map_err(pg)?;
                Ok(())
            })?;
        }
        copied.nodes = self.write(|tx| count(tx, "summary_nodes"))?;

        let mut after = self.write(|tx| max_id(tx, "messages"))?;
        loop {
            let messages = dump.messages(after, BATCH)?;
            let Some(last) = messages.last() else { break };
            after = last.message.id.0;
            let mut rows = Columns::default();
            for stored in &messages {
                rows.push(stored);
            }
            self.write(|tx| rows.insert(tx))?;
            progress("messages", after as u64);
        }
        copied.messages = self.write(|tx| count(tx, "messages"))?;

        for stored in dump.memories()? {
            self.write(|tx| copy_memory(tx, &stored))?;
            copied.memories += 1;
        }
        progress("memories", copied.memories);

        let queued = dump.queued()?;
        self.write(|tx| {
            for update in &queued {
                tx.execute(
                    "INSERT INTO memory_updates(id, persona, node_id, category, key, title, content, state, created_at,
                                                edit)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING",
                    &[
                        &update.id.0,
                        &update.persona,
                        &update.node_id.map(|node| node.0),
                        &update.update.category.as_str(),
                        &update.update.key,
                        &update.update.title,
                        &update.update.content,
                        &if update.proposed { "proposed" } else { "pending" },
                        &to_unix(update.created_at),
                        &update.update.edit.map(|edit| edit.as_str()),
                    ],
                )
                .map_err(pg)?;
            }
            Ok(())
        })?;
        copied.queued = queued.len() as u64;

        // Usage has no ids to resume by: it goes in one transaction that records it went.
        let (calls, rejections, encoding) = (dump.llm_calls()?, dump.rejections()?, dump.token_encoding()?);
        self.write(|tx| {
            let done: bool = tx.query_one("SELECT usage_copied FROM strata_copy", &[]).map_err(pg)?.get(0);
            if done {
                return Ok(());
            }
            crate::upkeep::record_llm_calls(tx, &calls)?;
            for (summarizer, reason, count) in &rejections {
                tx.execute(
                    "INSERT INTO summary_rejections(summarizer, reason, count, last_at) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (summarizer, reason) DO NOTHING",
                    &[summarizer, reason, &(*count as i64), &to_unix(Utc::now())],
                )
                .map_err(pg)?;
            }
            if let Some(encoding) = &encoding {
                crate::upkeep::claim_token_encoding(tx, encoding)?;
            }
            tx.execute("UPDATE strata_copy SET usage_copied = true", &[]).map_err(pg)?;
            Ok(())
        })?;

        if let Some(space) = dump.space()? {
            self.write(|tx| vectors::use_space(tx, &space))?;
            for kind in HitKind::ALL {
                let mut after = self.write(|tx| last_vector(tx, kind))?;
                loop {
                    let batch = dump.vectors(kind, after, BATCH)?;
                    let Some(last) = batch.last() else { break };
                    after = Some((last.item_id, last.chunk));
                    self.write(|tx| insert_vectors(tx, kind, &batch))?;
                    copied.vectors += batch.len() as u64;
                    progress("vectors", copied.vectors);
                }
            }
            copied.vectors = self.write(|tx| count(tx, "embeddings"))?;
        }

        // The backlog as the file has it: rows copied with their vectors wait for nothing, and a
        // summary rewritten since its vector still waits, as it did.
        let backlog = dump.backlog()?;
        self.write(|tx| {
            tx.execute("DELETE FROM embedding_backlog", &[]).map_err(pg)?;
            for kind in HitKind::ALL {
                let ids: Vec<i64> = backlog.iter().filter(|(k, _)| *k == kind).map(|(_, id)| *id).collect();
                let kind = Kind::of(kind);
                let sql = format!(
                    "INSERT INTO embedding_backlog(kind, item_id, persona, session_id)
                     SELECT '{name}', {a}.id, {a}.persona, {session} FROM {table} {a} WHERE {a}.id = ANY($1)",
                    name = kind.kind.as_str(),
                    a = kind.alias,
                    session = kind.session.unwrap_or("NULL::BIGINT"),
                    table = kind.table,
                );
                tx.execute(&sql, &[&ids]).map_err(pg)?;
            }
            // Ids go on from the copied ones; each session's next seq follows its last message.
            for table in ["sessions", "summary_nodes", "messages", "agent_memories", "memory_updates"] {
                tx.execute(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{table}', 'id'), greatest(max(id), 1), max(id) IS NOT NULL)
                         FROM {table}"
                    ),
                    &[],
                )
                .map_err(pg)?;
            }
            tx.execute(
                "UPDATE sessions s SET next_seq = coalesce((SELECT max(seq) + 1 FROM messages m WHERE m.session_id = s.id), 0)",
                &[],
            )
            .map_err(pg)?;
            tx.execute("UPDATE strata_copy SET finished_at = $1", &[&to_unix(Utc::now())]).map_err(pg)?;
            Ok(())
        })?;
        copied.backlog = backlog.len() as u64;
        Ok(copied)
    }
}

/// Records this copy in the target, or refuses a target that holds anything else.
fn claim(tx: &mut Tx<'_>, name: &str) -> Result<(), Error> {
    let recorded: Option<String> =
        tx.query_opt("SELECT source FROM strata_copy", &[]).map_err(pg)?.map(|row| row.get(0));
    match recorded {
        Some(source) if source == name => Ok(()),
        Some(source) => Err(Error::Invalid {
            field: "copy target",
            reason: format!("it holds a copy of {source}, not of {name}"),
        }),
        None => {
            let sessions = count(tx, "sessions")?;
            if sessions > 0 {
                return Err(Error::Invalid {
                    field: "copy target",
                    reason: format!("it already holds {sessions} sessions; copy into an empty database"),
                });
            }
            tx.execute(
                "INSERT INTO strata_copy(id, source, started_at) VALUES (1, $1, $2)",
                &[&name, &to_unix(Utc::now())],
            )
            .map_err(pg)?;
            Ok(())
        }
    }
}

fn count(tx: &mut Tx<'_>, table: &str) -> Result<u64, Error> {
    Ok(tx.query_one(&format!("SELECT count(*) FROM {table}"), &[]).map_err(pg)?.get::<_, i64>(0) as u64)
}

/// The highest id a table holds (0 when empty): where a resumed copy goes on.
fn max_id(tx: &mut Tx<'_>, table: &str) -> Result<i64, Error> {
    Ok(tx.query_one(&format!("SELECT coalesce(max(id), 0) FROM {table}"), &[]).map_err(pg)?.get(0))
}

fn last_vector(tx: &mut Tx<'_>, kind: HitKind) -> Result<Option<(i64, usize)>, Error> {
    let row = tx
        .query_opt(
            "SELECT item_id, chunk FROM embeddings WHERE kind = $1 ORDER BY item_id DESC, chunk DESC LIMIT 1",
            &[&kind.as_str()],
        )
        .map_err(pg)?;
    Ok(row.map(|row| (row.get(0), row.get::<_, i32>(1) as usize)))
}

fn insert_vectors(
    tx: &mut Tx<'_>,
    kind: HitKind,
    batch: &[strata_seam::transfer::StoredVector],
) -> Result<(), Error> {
    let kind = Kind::of(kind);
    let ids: Vec<i64> = batch.iter().map(|v| v.item_id).collect();
    let chunks: Vec<i32> = batch.iter().map(|v| v.chunk as i32).collect();
    let embeddings: Vec<Vector> = batch.iter().map(|v| Vector::from(v.vector.clone())).collect();
    let sql = format!(
        "INSERT INTO embeddings(kind, item_id, chunk, persona, session_id, at, embedding)
         SELECT '{name}', v.id, v.chunk, {a}.persona, {session}, {time}, v.embedding
         FROM unnest($1::BIGINT[], $2::INTEGER[], $3::VECTOR[]) AS v(id, chunk, embedding)
         JOIN {table} {a} ON {a}.id = v.id
         ON CONFLICT DO NOTHING",
        name = kind.kind.as_str(),
        a = kind.alias,
        session = kind.session.unwrap_or("NULL::BIGINT"),
        time = kind.time,
        table = kind.table,
    );
    tx.execute(&sql, &[&ids, &chunks, &embeddings]).map_err(pg)?;
    Ok(())
}

/// A memory and its versions, oldest first; nothing when it was copied before.
fn copy_memory(tx: &mut Tx<'_>, stored: &StoredMemory) -> Result<(), Error> {
    let memory = &stored.memory;
    let source = |provenance: &strata_seam::memories::Provenance| {
        serde_json::to_value(provenance)
            .map_err(|error| Error::Invalid { field: "provenance", reason: error.to_string() })
    };
    let current = stored.versions.last().map(|version| source(&version.provenance)).transpose()?;
    let inserted = tx
        .execute(
            "INSERT INTO agent_memories(id, persona, category, key, title, content, updated_at, folded, provenance,
                                        valid_from, valid_to)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
            &[
                &memory.id.0,
                &memory.persona,
                &memory.category.as_str(),
                &memory.key,
                &memory.title,
                &memory.content,
                &to_unix(memory.updated_at),
                &fold(&format!("{} {}: {}", memory.key, memory.title, memory.content)),
                &current,
                &to_unix(memory.valid_from),
                &memory.valid_to.map(to_unix),
            ],
        )
        .map_err(pg)?;
    if inserted == 0 {
        return Ok(());
    }
    for version in &stored.versions {
        tx.execute(
            "INSERT INTO memory_versions(memory_id, title, content, provenance, written_at, valid_from, valid_to)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &memory.id.0,
                &version.title,
                &version.content,
                &source(&version.provenance)?,
                &to_unix(version.written_at),
                &to_unix(version.valid_from),
                &version.valid_to.map(to_unix),
            ],
        )
        .map_err(pg)?;
    }
    Ok(())
}

/// A batch of stored messages as columns, for one `INSERT ... SELECT FROM unnest(...)`: what
/// an append writes, with the ids and coverage they already have.
#[derive(Default)]
struct Columns {
    id: Vec<i64>,
    session: Vec<i64>,
    summary: Vec<Option<i64>>,
    messages: MessageColumns,
}

impl Columns {
    fn push(&mut self, stored: &strata_seam::transfer::StoredMessage) {
        let message = &stored.message;
        self.id.push(message.id.0);
        self.session.push(message.session_id.0);
        self.summary.push(message.summary_id.map(|node| node.0));
        let new = NewMessage {
            role: message.role,
            content: message.content.clone(),
            tool_calls: message.tool_calls.clone(),
            tool_call_id: message.tool_call_id.clone(),
            name: message.name.clone(),
            created_at: message.created_at,
            token_count: message.token_count,
            pinned: message.pinned,
            external_id: stored.external_id.clone(),
            body: message.body.clone(),
        };
        self.messages.push_at(new, message.seq, stored.created_at_seconds);
    }

    fn insert(&self, tx: &mut Tx<'_>) -> Result<(), Error> {
        let m = &self.messages;
        tx.execute(
            "INSERT INTO messages(id, session_id, persona, seq, role, content, tool_calls, tool_call_id, name,
                                  created_at, token_count, pinned, summary_id, external_id, folded, body)
             SELECT v.id, v.session_id, s.persona, v.seq, v.role, v.content, v.tool_calls, v.tool_call_id, v.name,
                    v.created_at, v.token_count, v.pinned, v.summary_id, v.external_id, v.folded, v.body
             FROM unnest($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::JSONB[], $7::TEXT[],
                         $8::TEXT[], $9::FLOAT8[], $10::INTEGER[], $11::BOOLEAN[], $12::BIGINT[], $13::TEXT[],
                         $14::TEXT[], $15::TEXT[])
                  AS v(id, session_id, seq, role, content, tool_calls, tool_call_id, name, created_at, token_count,
                       pinned, summary_id, external_id, folded, body)
             JOIN sessions s ON s.id = v.session_id
             ON CONFLICT (id) DO NOTHING",
            &[
                &self.id,
                &self.session,
                &m.seq,
                &m.role,
                &m.content,
                &m.tool_calls,
                &m.tool_call_id,
                &m.name,
                &m.created_at,
                &m.token_count,
                &m.pinned,
                &self.summary,
                &m.external_id,
                &m.folded,
                &m.body,
            ],
        )
        .map_err(pg)?;
        Ok(())
    }
}
