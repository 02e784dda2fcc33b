//! strata-pg: strata's PostgreSQL backend, for a fleet of bot processes on several hosts that
//! share one memory.
//!
//! [`PgStore`] implements the storage seam ([`strata_seam::Backend`]) over a pool of
//! connections to one PostgreSQL database with the `vector` (pgvector) and `pg_trgm`
//! extensions. The server enforces what SQLite's triggers enforce (messages append-only and
//! verbatim, coverage written once, a node merged once, one memory per key), appends number a
//! session's messages under its row lock, and a compaction lease is a session-level advisory
//! lock that dies with its connection.
//!
//! ```no_run
//! use strata_seam::{Conversations, NewMessage, Role};
//!
//! # fn main() -> Result<(), strata_seam::Error> {
//! let store = strata_pg::PgStore::open("postgres://postgres:postgres@127.0.0.1:5432/strata")?;
//! let session = store.session("chat-1", "default")?;
//! store.append(session.id, &[NewMessage::text(Role::User, "The port is 8080.")])?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod check;
mod copy;
mod db;
mod dump;
mod forest;
mod forget;
mod maintenance;
mod memories;
mod outline;
mod rows;
mod search;
mod upkeep;
mod vectors;

use std::collections::HashMap;
use std::ops::RangeInclusive;

use chrono::DateTime;
use chrono::Utc;
use strata_seam::backend::{from_unix, to_unix, validate_session_key};
use strata_seam::check::Report;
use strata_seam::embeddings::{BacklogItem, EmbeddingSpace};
use strata_seam::forgetting::{ForgetPlan, ForgetRecord, ForgetScope, Forgotten, Rebuilt};
use strata_seam::memories::{
    MemoryUpdate, MemoryVersion, MemoryWrite, Provenance, QueuedUpdate, UpdateId, Writer,
};
use strata_seam::search::{CandidateQuery, Candidates, SearchFilter, TextHit, TextQuery};
use strata_seam::stats::{LlmCall, Stats, StoreMetrics};
use strata_seam::{
    Backend, Category, Conversations, Error, Forest, Lease, Level, Maintenance, Memories, Memory, Message,
    MessageId, MessageOutline, Missing, NewMessage, NewSummary, NodeId, Result, Search, Session, SessionId,
    SessionOverview, Snapshot, SummaryNode, Vectors,
};

pub use crate::db::SCHEMA_VERSION;
use crate::db::{Conn, Connection, Pool, Queries, Tx, pg, pool_error};
use crate::rows::MessageColumns;
pub use strata_seam::transfer::Copied;
use strata_seam::transfer::Source;

/// Connections a pool opens at most, unless [`PgStore::open_with_pool_size`] says otherwise.
const DEFAULT_POOL_SIZE: u32 = 8;

/// A strata database on a PostgreSQL server. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    url: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("url", &self.url).finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`),
    /// creating strata's tables or bringing them up to date.
    pub fn open(url: &str) -> Result<PgStore> {
        PgStore::open_with_pool_size(url, DEFAULT_POOL_SIZE)
    }

    /// Like [`PgStore::open`], with at most `size` connections.
    pub fn open_with_pool_size(url: &str, size: u32) -> Result<PgStore> {
        Ok(PgStore { pool: db::open(url, size.max(1))?, url: strata_seam::location::without_password(url) })
    }

    /// True for a database location this backend opens (`postgres://`, `postgresql://`).
    pub fn is_url(location: &str) -> bool {
        strata_seam::location::is_postgres_url(location)
    }

    fn connection(&self) -> Result<Connection> {
        self.pool.get().map_err(pool_error)
    }

    /// Runs `f` in a read-committed transaction and commits it.
    fn write<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.connection()?;
        let mut tx = conn.transaction().map_err(pg)?;
        let value = f(&mut tx)?;
        tx.commit().map_err(pg)?;
        Ok(value)
    }

    /// Runs `f`, one statement, on a pooled connection: a statement sees one snapshot of its
    /// own, so it needs no transaction (which would cost two more round trips).
    fn read<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        f(&mut *self.connection()?)
    }

    /// Runs `f` in a read-only repeatable-read transaction: one snapshot for every read in it,
    /// and it never waits for a writer.
    fn snapshot<T>(&self, f: impl FnOnce(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.connection()?;
        let mut tx = conn.snapshot().map_err(pg)?;
        let value = f(&mut tx)?;
        tx.commit().map_err(pg)?;
        Ok(value)
    }
}

fn session_by_id(db: &mut impl Queries, id: SessionId, lock: bool) -> Result<Session> {
    let sql = format!(
        "SELECT {} FROM sessions WHERE id = $1{}",
        rows::SESSION,
        if lock { " FOR UPDATE" } else { "" }
    );
    db.query_opt(&sql, &[&id.0])
        .map_err(pg)?
        .map(|row| rows::session(&row))
        .ok_or(Error::NotFound(Missing::Session(id)))
}

/// Where an appended message's id comes from.
enum Slot {
    /// The session held it already, under its key.
    Stored(MessageId),
    /// The new row at this index of the append's [`MessageColumns`].
    New(usize),
}

fn key_reused(key: &str, id: i64) -> Error {
    Error::Invalid {
        field: "external_id",
        reason: format!("{key:?} already names message {id} of this session, which is a different message"),
    }
}

impl Maintenance for PgStore {
    fn import(
        &self,
        incoming: &[strata_seam::transfer::IncomingMessage],
    ) -> Result<strata_seam::transfer::Imported> {
        self.import_messages(incoming)
    }

    fn export_messages(
        &self,
        scope: strata_seam::transfer::ExportScope<'_>,
    ) -> Result<Vec<strata_seam::transfer::ExportedMessage>> {
        self.exported(scope)
    }

    fn forget_plan(&self, scope: &ForgetScope) -> Result<ForgetPlan> {
        self.plan_forget(scope)
    }

    fn forget(
        &self,
        scope: &ForgetScope,
        command: &str,
        rebuilt: &[Rebuilt],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Forgotten> {
        self.erase(scope, command, rebuilt, progress)
    }

    fn forgets(&self) -> Result<Vec<ForgetRecord>> {
        self.forget_records()
    }

    fn read_dump(&self, f: &mut dyn FnMut(&dyn Source) -> Result<Copied>) -> Result<Copied> {
        PgStore::read_dump(self, f)
    }

    fn copy_from(
        &self,
        dump: &dyn Source,
        name: &str,
        progress: &mut dyn FnMut(&str, u64),
    ) -> Result<Copied> {
        PgStore::copy_from(self, dump, name, progress)
    }

    /// One snapshot of the server's database, copied into the new SQLite file: PostgreSQL has
    /// no file copy of its own that a SQLite reader opens.
    fn backup(&self, dest: &std::path::Path) -> Result<()> {
        strata_store::backup_into(self, dest)
    }

    fn record_llm_calls(&self, calls: &[LlmCall]) -> Result<()> {
        if calls.is_empty() {
            return Ok(());
        }
        self.write(|tx| upkeep::record_llm_calls(tx, calls))
    }

    fn stats(&self) -> Result<Stats> {
        self.snapshot(upkeep::stats)
    }

    fn metrics(&self) -> Result<StoreMetrics> {
        self.snapshot(upkeep::metrics)
    }

    fn usage_by_day(&self) -> Result<Vec<strata_seam::stats::UsageDay>> {
        self.read(upkeep::usage_by_day)
    }

    fn doctor(&self, _full: bool) -> Result<Report> {
        // The server checks its own pages (checksums, WAL); strata checks its rows.
        self.snapshot(check::doctor)
    }
}

impl Backend for PgStore {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn read_snapshot(&self, f: &mut dyn FnMut(&dyn Snapshot) -> Result<()>) -> Result<()> {
        self.snapshot(|tx| f(&outline::Reader::new(tx)))
    }
}

impl Conversations for PgStore {
    fn session(&self, key: &str, persona: &str) -> Result<Session> {
        validate_session_key(key)?;
        strata_seam::backend::validate_persona(persona)?;
        self.write(|tx| {
            let now = to_unix(Utc::now());
            // Of two processes creating one key, one inserts; the other finds its row.
            tx.execute(
                "INSERT INTO sessions(key, persona, created_at, last_active_at) VALUES ($1, $2, $3, $3)
                 ON CONFLICT (key) DO NOTHING",
                &[&key, &persona, &now],
            )
            .map_err(pg)?;
            let sql = format!("SELECT {} FROM sessions WHERE key = $1", rows::SESSION);
            let session = rows::session(&tx.query_one(&sql, &[&key]).map_err(pg)?);
            if session.persona != persona {
                return Err(Error::PersonaMismatch {
                    key: key.to_owned(),
                    existing: session.persona,
                    requested: persona.to_owned(),
                });
            }
            Ok(session)
        })
    }

    fn find_session(&self, key: &str) -> Result<Option<Session>> {
        let sql = format!("SELECT {} FROM sessions WHERE key = $1", rows::SESSION);
        Ok(self.connection()?.query_opt(&sql, &[&key]).map_err(pg)?.map(|row| rows::session(&row)))
    }

    fn session_by_id(&self, id: SessionId) -> Result<Session> {
        self.read(|db| session_by_id(db, id, false))
    }

    fn sessions(&self, persona: Option<&str>) -> Result<Vec<Session>> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE $1::TEXT IS NULL OR persona = $1 ORDER BY created_at, id",
            rows::SESSION
        );
        Ok(self.connection()?.query(&sql, &[&persona]).map_err(pg)?.iter().map(rows::session).collect())
    }

    fn session_overviews(&self, persona: &str) -> Result<Vec<SessionOverview>> {
        let found = self
            .connection()?
            .query(
                "SELECT s.id, s.key, s.created_at, s.last_active_at,
                        (SELECT count(*) FROM messages m WHERE m.session_id = s.id),
                        (SELECT count(*) FROM messages m WHERE m.session_id = s.id AND m.summary_id IS NULL)
                 FROM sessions s WHERE s.persona = $1 ORDER BY s.created_at, s.id",
                &[&persona],
            )
            .map_err(pg)?;
        Ok(found
            .iter()
            .map(|row| SessionOverview {
                id: SessionId(row.get(0)),
                key: row.get(1),
                created_at: from_unix(row.get(2)),
                last_active_at: from_unix(row.get(3)),
                messages: row.get::<_, i64>(4) as u64,
                uncompacted_messages: row.get::<_, i64>(5) as u64,
            })
            .collect())
    }

    fn append(&self, session: SessionId, messages: &[NewMessage]) -> Result<Vec<MessageId>> {
        for message in messages {
            message.validate()?;
        }
        self.write(|tx| Ok(append_in(tx, session, messages)?.ids))
    }

    fn message(&self, id: MessageId) -> Result<Message> {
        let sql = format!("SELECT {} FROM messages WHERE id = $1", rows::MESSAGE);
        let row = self.connection()?.query_opt(&sql, &[&id.0]).map_err(pg)?;
        row.map(|row| rows::message(&row)).ok_or(Error::NotFound(Missing::Message(id)))
    }

    fn messages(&self, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>> {
        let sql = format!(
            "SELECT {} FROM messages WHERE session_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq",
            rows::MESSAGE
        );
        let found = self.connection()?.query(&sql, &[&session.0, seqs.start(), seqs.end()]).map_err(pg)?;
        Ok(found.iter().map(rows::message).collect())
    }

    fn message_outline(&self, session: SessionId) -> Result<Vec<MessageOutline>> {
        self.read(|db| outline::outline(db, session))
    }

    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>> {
        self.read(|db| outline::live_outline(db, session, head))
    }

    fn recent_uncovered(&self, session: SessionId, limit: usize) -> Result<Vec<Message>> {
        self.read(|db| outline::recent_uncovered(db, session, limit))
    }

    fn token_encoding(&self) -> Result<Option<String>> {
        self.read(upkeep::token_encoding)
    }

    fn claim_token_encoding(&self, encoding: &str) -> Result<String> {
        self.write(|tx| upkeep::claim_token_encoding(tx, encoding))
    }
}

impl Forest for PgStore {
    fn insert_leaves(
        &self,
        session: SessionId,
        leaves: &[(i64, i64, NewSummary)],
    ) -> Result<Vec<SummaryNode>> {
        self.write(|tx| {
            leaves
                .iter()
                .map(|(first_seq, last_seq, summary)| {
                    forest::insert_leaf(tx, session, *first_seq, *last_seq, summary)
                })
                .collect()
        })
    }

    fn merge(&self, children: &[NodeId], summary: &NewSummary) -> Result<SummaryNode> {
        self.write(|tx| forest::merge(tx, children, summary))
    }

    fn replace_summary(
        &self,
        id: NodeId,
        expected_summarizer: &str,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        self.write(|tx| forest::replace_summary(tx, id, expected_summarizer, summary))
    }

    fn node(&self, id: NodeId) -> Result<SummaryNode> {
        self.read(|db| forest::by_id(db, id))
    }

    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>> {
        self.read(|db| forest::roots(db, session, level))
    }

    fn nodes(&self, session: SessionId) -> Result<Vec<SummaryNode>> {
        self.read(|db| forest::all(db, session))
    }

    fn children(&self, id: NodeId) -> Result<Vec<SummaryNode>> {
        self.read(|db| forest::children(db, id))
    }

    fn first_raw_archive(&self, session: SessionId) -> Result<Option<SummaryNode>> {
        self.read(|db| forest::first_raw_archive(db, session))
    }

    fn covered_messages(&self, node: NodeId) -> Result<Vec<Message>> {
        let sql = format!("SELECT {} FROM messages WHERE summary_id = $1 ORDER BY seq", rows::MESSAGE);
        let found = self.connection()?.query(&sql, &[&node.0]).map_err(pg)?;
        Ok(found.iter().map(rows::message).collect())
    }

    fn set_summarizer_failures(&self, session: SessionId, failures: u32) -> Result<()> {
        self.write(|tx| upkeep::set_summarizer_failures(tx, session, failures))
    }

    fn count_rejection(&self, summarizer: &str, reason: &str) -> Result<()> {
        self.write(|tx| upkeep::count_rejection(tx, summarizer, reason))
    }

    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>> {
        let mut conn = self.connection()?;
        let key = LEASE_NAMESPACE | session.0;
        let taken: bool = conn.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).map_err(pg)?.get(0);
        Ok(taken.then(|| Box::new(AdvisoryLease { conn: Some(conn), key }) as Box<dyn Lease>))
    }
}

impl Memories for PgStore {
    fn save_memory(
        &self,
        writer: Writer,
        persona: &str,
        memory: &MemoryWrite<'_>,
        provenance: &Provenance,
    ) -> Result<(Memory, bool)> {
        self.write(|tx| memories::save(tx, writer, persona, memory, provenance, Utc::now()))
    }

    fn supersede_memory(
        &self,
        writer: Writer,
        persona: &str,
        category: Category,
        key: &str,
        with: Option<&MemoryWrite<'_>>,
        at: DateTime<Utc>,
        provenance: &Provenance,
    ) -> Result<Memory> {
        self.write(|tx| {
            memories::supersede(tx, writer, persona, category, key, with, at, provenance, Utc::now())
        })
    }

    fn merge_memory(
        &self,
        persona: &str,
        category: Category,
        key: &str,
        into: &MemoryWrite<'_>,
        provenance: &Provenance,
    ) -> Result<Memory> {
        self.write(|tx| memories::merge(tx, persona, category, key, into, provenance, Utc::now()))
    }

    fn memories_as_of(
        &self,
        persona: &str,
        category: Option<Category>,
        at: DateTime<Utc>,
    ) -> Result<Vec<Memory>> {
        self.read(|db| memories::list_as_of(db, persona, category, at))
    }

    fn memory(&self, persona: &str, category: Category, key: &str) -> Result<Option<Memory>> {
        let sql = format!(
            "SELECT {} FROM agent_memories WHERE persona = $1 AND category = $2 AND key = $3",
            rows::MEMORY
        );
        let row = self.connection()?.query_opt(&sql, &[&persona, &category.as_str(), &key]).map_err(pg)?;
        Ok(row.map(|row| rows::memory(&row)))
    }

    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
        self.read(|db| memories::list(db, persona, category))
    }

    fn memory_history(&self, persona: &str, category: Category, key: &str) -> Result<Vec<MemoryVersion>> {
        self.snapshot(|tx| memories::history(tx, persona, category, key))
    }

    fn delete_memory(&self, writer: Writer, persona: &str, category: Category, key: &str) -> Result<bool> {
        self.write(|tx| memories::delete(tx, writer, persona, category, key))
    }

    fn purge_memories(&self, category: Category, cutoff: DateTime<Utc>) -> Result<usize> {
        self.write(|tx| memories::purge(tx, category, cutoff))
    }

    fn pending_updates(&self, limit: usize) -> Result<Vec<QueuedUpdate>> {
        let sql = format!(
            "SELECT {} FROM memory_updates WHERE state = 'pending' ORDER BY id LIMIT $1",
            rows::UPDATE
        );
        let found = self.connection()?.query(&sql, &[&(limit as i64)]).map_err(pg)?;
        Ok(found.iter().map(rows::update).collect())
    }

    fn settle_update(&self, id: UpdateId) -> Result<()> {
        self.connection()?
            .execute("DELETE FROM memory_updates WHERE id = $1 AND state = 'pending'", &[&id.0])
            .map_err(pg)?;
        Ok(())
    }

    fn propose_preference(&self, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()> {
        self.write(|tx| memories::propose(tx, id, key, title, content))
    }

    fn propose_stated(&self, persona: &str, update: &MemoryUpdate) -> Result<()> {
        self.write(|tx| memories::propose_stated(tx, persona, update, Utc::now()))
    }

    fn proposals(&self, persona: &str) -> Result<Vec<QueuedUpdate>> {
        self.read(|db| memories::proposals(db, persona))
    }

    fn accept_proposal(&self, persona: &str, key: &str) -> Result<Memory> {
        self.write(|tx| {
            let found = memories::take_proposal(tx, persona, key)?;
            let (write, provenance) = strata_seam::backend::accepted_proposal(&found);
            Ok(memories::save(tx, Writer::User, persona, &write, &provenance, Utc::now())?.0)
        })
    }

    fn reject_proposal(&self, persona: &str, key: &str) -> Result<QueuedUpdate> {
        self.write(|tx| memories::take_proposal(tx, persona, key))
    }
}

impl Search for PgStore {
    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>> {
        self.snapshot(|tx| search::grep(tx, query, filter))
    }

    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates> {
        self.snapshot(|tx| search::candidates(tx, query))
    }

    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>> {
        self.read(|db| search::said_between(db, filter, oldest_first, offset))
    }
}

impl Vectors for PgStore {
    fn use_space(&self, space: &EmbeddingSpace) -> Result<bool> {
        self.write(|tx| vectors::use_space(tx, space))
    }

    fn backlog_count(&self, persona: Option<&str>, session: Option<SessionId>) -> Result<u64> {
        self.read(|db| vectors::backlog_count(db, persona, session))
    }

    fn backlog(
        &self,
        persona: Option<&str>,
        session: Option<SessionId>,
        limit: usize,
    ) -> Result<Vec<BacklogItem>> {
        self.snapshot(|tx| vectors::backlog(tx, persona, session, limit))
    }

    fn put_vectors(&self, model: &str, items: &[(BacklogItem, Vec<Vec<f32>>)]) -> Result<usize> {
        self.write(|tx| vectors::put(tx, model, items))
    }
}

/// The high bits that set a session's lease key apart from the migration lock's.
const LEASE_NAMESPACE: i64 = 1 << 62;

/// A session-level advisory lock, held on a connection taken from the pool for as long as the
/// lease lives. The server releases it when that connection ends, so a crashed process's lease
/// goes with it.
struct AdvisoryLease {
    conn: Option<Connection>,
    key: i64,
}

impl Lease for AdvisoryLease {}

impl Drop for AdvisoryLease {
    fn drop(&mut self) {
        let (Some(conn), key) = (self.conn.take(), self.key) else { return };
        // The synchronous client cannot block a thread that drives async tasks (a compaction
        // dropped mid-way on tokio, say): there the lock is given back from a thread of its own.
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::spawn(move || unlock(conn, key));
        } else {
            unlock(conn, key);
        }
    }
}

fn unlock(mut conn: Connection, key: i64) {
    if let Err(error) = conn.execute("SELECT pg_advisory_unlock($1)", &[&key]) {
        // The connection is broken, and the server drops its locks with it.
        tracing::warn!(%error, "could not give a compaction lease back");
    }
}

/// What [`append_in`] did.
pub(crate) struct Appended {
    /// Every message's id, in order (a key the session held gives its stored id).
    pub ids: Vec<MessageId>,
    /// The messages this call stored, in order.
    pub stored: Vec<MessageId>,
    /// The seq the first stored message got.
    pub first_seq: i64,
}

/// Appends validated messages to a session inside `tx`: one statement for every new message,
/// numbered under the session's row lock; a message whose key the session holds is not stored
/// again.
pub(crate) fn append_in(tx: &mut Tx<'_>, session: SessionId, messages: &[NewMessage]) -> Result<Appended> {
    // The session's row lock numbers its messages: appends to one session queue here,
    // appends to others do not wait.
    let persona = session_by_id(tx, session, true)?.persona;
    let mut seq: i64 =
        tx.query_one("SELECT next_seq FROM sessions WHERE id = $1", &[&session.0]).map_err(pg)?.get(0);
    // The messages the session already holds under their keys, in one read.
    let keys: Vec<&str> = messages.iter().filter_map(|message| message.external_id.as_deref()).collect();
    let stored: HashMap<String, (i64, String, String)> = if keys.is_empty() {
        HashMap::new()
    } else {
        tx.query(
            "SELECT external_id, id, role, content FROM messages
                 WHERE session_id = $1 AND external_id = ANY($2)",
            &[&session.0, &keys],
        )
        .map_err(pg)?
        .into_iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2), row.get(3))))
        .collect()
    };
    // Every new message goes in one statement (columns as arrays), so an append of a
    // thousand costs one round trip, not a thousand.
    let first_seq = seq;
    let mut rows = MessageColumns::default();
    let mut plan: Vec<Slot> = Vec::with_capacity(messages.len());
    let mut newest = f64::MIN;
    let mut fresh_keys: HashMap<&str, usize> = HashMap::new();
    for message in messages {
        if let Some(key) = message.external_id.as_deref() {
            if let Some((id, role, content)) = stored.get(key) {
                if role != message.role.as_str() || *content != message.content {
                    return Err(key_reused(key, *id));
                }
                plan.push(Slot::Stored(MessageId(*id)));
                continue;
            }
            // A key twice in one call: the second is the first's retry.
            if let Some(&row) = fresh_keys.get(key) {
                if rows.content[row] != message.content || rows.role[row] != message.role.as_str() {
                    return Err(Error::Invalid {
                        field: "external_id",
                        reason: format!("{key:?} names two different messages in one append"),
                    });
                }
                plan.push(Slot::New(row));
                continue;
            }
            fresh_keys.insert(key, rows.len());
        }
        newest = newest.max(to_unix(message.created_at));
        plan.push(Slot::New(rows.len()));
        rows.push(message.clone(), seq);
        seq += 1;
    }
    let mut inserted = vec![MessageId(0); rows.len()];
    if !rows.seq.is_empty() {
        let returned = tx
            .query(
                "INSERT INTO messages(session_id, persona, seq, role, content, tool_calls, tool_call_id,
                                          name, created_at, token_count, pinned, external_id, folded, body)
                     SELECT $1, $2, * FROM unnest($3::BIGINT[], $4::TEXT[], $5::TEXT[], $6::JSONB[],
                                                  $7::TEXT[], $8::TEXT[], $9::FLOAT8[], $10::INTEGER[],
                                                  $11::BOOLEAN[], $12::TEXT[], $13::TEXT[], $14::TEXT[])
                     RETURNING id, seq",
                &[
                    &session.0,
                    &persona,
                    &rows.seq,
                    &rows.role,
                    &rows.content,
                    &rows.tool_calls,
                    &rows.tool_call_id,
                    &rows.name,
                    &rows.created_at,
                    &rows.token_count,
                    &rows.pinned,
                    &rows.external_id,
                    &rows.folded,
                    &rows.body,
                ],
            )
            .map_err(pg)?;
        for row in returned {
            inserted[(row.get::<_, i64>(1) - first_seq) as usize] = MessageId(row.get(0));
        }
    }
    let ids = plan
        .into_iter()
        .map(|slot| match slot {
            Slot::Stored(id) => id,
            Slot::New(row) => inserted[row],
        })
        .collect();
    tx.execute(
        "UPDATE sessions SET next_seq = $2, last_active_at = greatest(last_active_at, $3) WHERE id = $1",
        &[&session.0, &seq, &newest],
    )
    .map_err(pg)?;
    Ok(Appended { ids, stored: inserted, first_seq })
}
