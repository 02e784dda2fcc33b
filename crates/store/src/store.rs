//! The `Store` type: owns the pool and every transaction boundary.

use std::collections::HashMap;
use std::fs::File;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::agent_memories::{self, MemoryWrite};
use crate::check;
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::export::{ExportScope, ExportedMessage};
use crate::metrics::{self, StoreMetrics};
use crate::outline::{self, MessageOutline};
use crate::provenance::{MemoryVersion, Provenance};
use crate::search::index::Deferred;
use crate::search::{self, CandidateQuery, Candidates, SearchFilter, TextHit, TextQuery};
use crate::sessions::{self, SessionOverview};
use crate::types::{
    Category, Level, Memory, MemoryUpdate, Message, MessageId, NewMessage, NewSummary, NodeId, QueuedUpdate,
    Session, SessionId, SummaryNode, UpdateId, Writer,
};
use crate::usage::{self, LlmCall};
use crate::vectors::{self, BacklogItem, EmbeddingSpace};
use crate::{forest, ingests, messages, migrate, queues, watermark};
pub(crate) use strata_seam::backend::{Backend, Lease, Snapshot};
use strata_seam::check::Report;
pub(crate) use strata_seam::forgetting::{ForgetPlan, ForgetRecord, ForgetScope, Forgotten, Rebuilt};
pub(crate) use strata_seam::maintenance::Maintenance;
pub(crate) use strata_seam::stats::{RejectionCount, Stats, SummarizerStats};
pub(crate) use strata_seam::transfer::{Imported, IncomingMessage};
pub(crate) use strata_seam::{Conversations, Forest, Memories, Search, Vectors};

/// Rows indexed per transaction when a writer catches the search indexes up: short enough
/// that other writers wait milliseconds for the lock, not the whole catch-up.
const INDEX_BATCH: usize = 2_000;

/// Appends of at most this many messages are indexed for search in their own transaction
/// (when nothing older waits); larger ones are indexed later, in batches.
const SYNC_INDEX_MAX: usize = 16;

/// A strata database: one SQLite file in WAL mode, shared by a pool of connections.
///
/// Cheap to clone; every clone uses the same pool. Writes run in short immediate transactions,
/// so concurrent writers queue on the lock (up to the busy timeout) instead of failing.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: Pool,
    path: PathBuf,
    /// How many message and node rows the planning reads returned, in every clone (what
    /// tests check a cost by: `Store::rows_read`).
    pub(crate) rows_read: Arc<AtomicU64>,
}

impl Store {
    /// Opens the database at `path` for writing, creating it and bringing its schema up to
    /// date.
    ///
    /// Before anything is written: a file of another program is refused with
    /// [`Error::NotStrata`], one written by a newer strata with [`Error::SchemaTooNew`], and a
    /// damaged one (SQLite's `quick_check`, once per open) with [`Error::Damaged`], each left
    /// byte for byte as it was; a file that is not a SQLite database gives [`Error::Corrupt`].
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with_timeout(path, db::DEFAULT_BUSY_TIMEOUT)
    }

    /// Like [`Store::open`], with the time a writer waits for the lock before [`Error::Busy`]
    /// (at most about 24.8 days, the longest SQLite takes).
    pub fn open_with_timeout(path: impl AsRef<Path>, busy_timeout: Duration) -> Result<Store> {
        Store::open_as(path.as_ref(), busy_timeout, db::Access::Write)
    }

    /// Opens an existing database for a command that only reads: a missing file is
    /// [`Error::Missing`], an empty one [`Error::Empty`], and nothing is created. The same
    /// refusals as [`Store::open`] but the damage check, which `doctor` reports instead.
    ///
    /// The file is decided on through a read-only connection, and a file of an older strata is
    /// brought up to date (once, the only write); then every connection is read-only, so
    /// nothing the store is asked writes or waits for the write lock: a method that writes
    /// fails with SQLite's read-only error. Searches find rows not indexed yet without
    /// writing (see `search_index.rs`).
    pub fn open_existing(path: impl AsRef<Path>, busy_timeout: Duration) -> Result<Store> {
        Store::open_as(path.as_ref(), busy_timeout, db::Access::Read)
    }

    /// Like [`Store::open_existing`], for `doctor`: the pool may write, since the full-text
    /// check indexes the rows waiting for the index inside a savepoint it rolls back (so it
    /// takes the write lock for a moment, and leaves the file as it was).
    pub fn open_to_inspect(path: impl AsRef<Path>, busy_timeout: Duration) -> Result<Store> {
        Store::open_as(path.as_ref(), busy_timeout, db::Access::Inspect)
    }

    fn open_as(path: &Path, busy_timeout: Duration, access: db::Access) -> Result<Store> {
        let path = path.to_path_buf();
        // The first connection is opened by hand so that its errors keep their detail; the pool
        // would reduce them to a message.
        let mut conn = db::open_connection(&path, busy_timeout, access)?;
        migrate::migrate(&mut conn)?;
        if let Some((found, recorded)) = watermark::lost(&conn, &path)? {
            let lost = Error::CommitsLost { path: path.clone(), found, recorded };
            if access == db::Access::Write {
                return Err(lost);
            }
            // A reader still reads what is left; `doctor` reports it as a problem.
            tracing::warn!("{lost}");
        }
        drop(conn);
        Ok(Store { pool: db::pool(&path, busy_timeout, access)?, path, rows_read: Arc::default() })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.pool.get()?;
        f(&conn)
    }

    /// Runs `f` in a deferred transaction: every read in it sees one snapshot of the database
    /// (WAL), whatever other processes commit meanwhile, and it never takes the write lock.
    pub(crate) fn read_snapshot<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let mut conn = self.pool.get()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let value = f(&tx)?;
        tx.finish()?;
        Ok(value)
    }

    /// Runs `f` in an immediate transaction: it takes the write lock at the start, so a
    /// read-then-write inside it cannot fail half-way with `SQLITE_BUSY`.
    ///
    /// It bumps the commit watermark (see `watermark.rs`) and, once committed, records it
    /// beside the file, so a commit lost with a damaged WAL is noticed.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.pool.get()?;
        self.write_on(&mut conn, f)
    }

    /// [`Store::write`] on a connection the caller holds (with its own pragmas, as forgetting
    /// sets `secure_delete`).
    pub(crate) fn write_on<T>(
        &self,
        conn: &mut Connection,
        f: impl FnOnce(&Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        let watermark = watermark::bump(&tx)?;
        tx.commit()?;
        if let Some((file_id, commits)) = watermark {
            watermark::write_copy(&self.path, &file_id, commits);
        }
        Ok(value)
    }

    /// Commits recorded beside the file but missing from it, as `(in the database, recorded)`:
    /// its WAL was damaged or cut short. `None` when nothing is missing.
    pub fn lost_commits(&self) -> Result<Option<(u64, u64)>> {
        self.read(|conn| watermark::lost(conn, &self.path))
    }

    /// Accepts that the commits [`Store::lost_commits`] names are gone: the record beside the
    /// file is set to what the database holds, and writers are allowed again.
    pub fn accept_lost_commits(&self) -> Result<()> {
        if let Some((file_id, commits)) = self.read(watermark::in_database)? {
            watermark::write_copy(&self.path, &file_id, commits);
        }
        Ok(())
    }

    // Health.

    /// SQLite's `quick_check`: an error naming the first problems when the file is damaged.
    /// [`Store::open`] runs it once, so no writer adds to a damaged file.
    pub fn quick_check(&self) -> Result<()> {
        let check = self.read(|conn| check::sqlite_check(conn, false))?;
        match check.problems {
            0 => Ok(()),
            n => Err(Error::Damaged {
                problems: n,
                first: check.details.into_iter().next().unwrap_or_default(),
            }),
        }
    }

    /// A consistent copy of the database at `dest` (which must not exist), taken while other
    /// processes keep writing.
    pub fn backup(&self, dest: &Path) -> Result<()> {
        self.read(|conn| check::backup(conn, dest))
    }

    // Messages.

    /// Appends messages to sessions named by key, creating sessions as needed, all in one
    /// transaction: either every message is stored or none is. Messages keep their order
    /// within each session.
    ///
    /// Idempotent: when every message of a session carries its `line_digest`, the leading
    /// lines that an earlier call stored for that session (the same transcript, or a shorter
    /// version of it) are skipped, and the call is recorded; a message whose `external_id` its
    /// session already holds is skipped too.
    ///
    /// The messages are not indexed for search: the caller catches the index up once the call
    /// returns, with [`Search::catch_up_search_index`] or, to show progress,
    /// [`Store::index_messages`] in a loop. Until then `memory_grep` still finds them (it reads
    /// the unindexed rows) but `memory_search` ranks only indexed ones.
    pub fn append_many(&self, incoming: &[IncomingMessage]) -> Result<Imported> {
        let now = Utc::now();
        // Each session's messages, in order of the session's first appearance.
        let mut order: Vec<&str> = Vec::new();
        let mut by_session: HashMap<&str, Vec<&IncomingMessage>> = HashMap::new();
        for item in incoming {
            by_session
                .entry(item.session_key.as_str())
                .or_insert_with(|| {
                    order.push(&item.session_key);
                    Vec::new()
                })
                .push(item);
        }
        self.write(|tx| {
            let mut imported = Imported::default();
            for key in &order {
                let group = &by_session[key];
                let first = group[0];
                let session = sessions::get_or_create(tx, key, &first.persona, now)?;
                // Every line's persona is checked, not only the first: a key seen with another
                // persona must be refused wherever it appears.
                if let Some(other) = group.iter().find(|item| item.persona != session.persona) {
                    return Err(Error::PersonaMismatch {
                        key: other.session_key.clone(),
                        existing: session.persona.clone(),
                        requested: other.persona.clone(),
                    });
                }
                let digests: Option<Vec<[u8; 32]>> = group.iter().map(|item| item.line_digest).collect();
                let chain = digests.as_deref().map(strata_seam::maintenance::chain).unwrap_or_default();
                let mut done = ingests::already_stored(tx, session.id, &chain)?;
                if done == 0 && !chain.is_empty() {
                    // An edited or shortened version of a transcript imported before.
                    let messages: Vec<&NewMessage> = group.iter().map(|item| &item.message).collect();
                    done = ingests::stored_by_content(tx, session.id, key, &messages)?;
                }
                let messages: Vec<NewMessage> =
                    group[done..].iter().map(|item| item.message.clone()).collect();
                let appended = messages::append(tx, session.id, &messages)?;
                ingests::record(tx, session.id, &chain, appended.first_seq, now)?;
                imported.skipped += done + messages.len() - appended.stored.len();
                imported.ids.extend(appended.stored);
            }
            Ok(imported)
        })
    }

    /// Every message of a session, in order.
    #[cfg(any(test, feature = "test-support"))]
    pub fn all_messages(&self, session: SessionId) -> Result<Vec<Message>> {
        Conversations::messages(self, session, 0..=i64::MAX)
    }

    /// Every message of a persona or a session with every stored field, for a lossless
    /// export: sessions oldest first, each in seq order, read in one statement.
    pub fn export_messages(&self, scope: ExportScope<'_>) -> Result<Vec<ExportedMessage>> {
        self.read(|conn| crate::export::messages(conn, scope))
    }

    /// Pins or unpins a message (pinned messages are never compacted).
    #[cfg(any(test, feature = "test-support"))]
    pub fn set_pinned(&self, id: MessageId, pinned: bool) -> Result<()> {
        self.write(|tx| messages::set_pinned(tx, id, pinned))
    }

    // Search.

    /// Messages appended but not yet in the search indexes (schema 8): a bulk append writes
    /// only the rows, and its writer indexes them afterwards (see `search_index.rs`).
    pub fn unindexed_messages(&self) -> Result<u64> {
        self.read(|conn| Deferred::Messages.unindexed(conn))
    }

    /// Indexes up to `limit` of the messages waiting for the search indexes, in one
    /// transaction; returns how many. Bulk writers call it in a loop with a progress bar.
    pub fn index_messages(&self, limit: usize) -> Result<usize> {
        self.write(|tx| Deferred::Messages.index(tx, limit.max(1)))
    }

    /// Summary nodes written but not yet in the search indexes (schema 10).
    #[cfg(any(test, feature = "test-support"))]
    pub fn unindexed_summaries(&self) -> Result<u64> {
        self.read(|conn| Deferred::Summaries.unindexed(conn))
    }

    /// Indexes every summary node waiting for the search indexes, one statement per index and
    /// batch; returns how many. A compaction calls it at its end: nodes are written without
    /// their index entries, since FTS5 writes a segment at every statement that touches it.
    pub(crate) fn index_summaries(&self) -> Result<usize> {
        let mut indexed = 0;
        loop {
            let batch = self.write(|tx| Deferred::Summaries.index(tx, INDEX_BATCH))?;
            indexed += batch;
            if batch < INDEX_BATCH {
                return Ok(indexed);
            }
        }
    }

    /// Indexes every message waiting for the search indexes, in batches; returns how many.
    fn catch_up_messages(&self) -> Result<usize> {
        if self.read(|conn| Deferred::Messages.caught_up(conn))? {
            return Ok(0);
        }
        let mut indexed = 0;
        loop {
            let batch = self.index_messages(INDEX_BATCH)?;
            indexed += batch;
            if batch < INDEX_BATCH {
                return Ok(indexed);
            }
        }
    }
}

fn rejections(conn: &Connection) -> Result<Vec<RejectionCount>> {
    let mut statement = conn.prepare_cached(
        "SELECT summarizer, reason, count FROM summary_rejections ORDER BY summarizer, count DESC, reason",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(RejectionCount {
            summarizer: row.get(0)?,
            reason: row.get(1)?,
            count: row.get::<_, i64>(2)? as u64,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// SQLite's lease: an advisory lock (`flock`) on a file beside the database, one per session.
/// The kernel drops it with the last descriptor, so a crashed process gives it up; two
/// processes on one host (the only place a SQLite file is shared) see each other's.
struct FileLease(#[allow(dead_code)] File);

impl Lease for FileLease {}

/// Every method is one short transaction on the pool (or one read); see [`Backend`] for what
/// each promises.
impl From<Store> for strata_seam::SharedBackend {
    fn from(store: Store) -> strata_seam::SharedBackend {
        std::sync::Arc::new(store)
    }
}

impl Backend for Store {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn read_snapshot(&self, f: &mut dyn FnMut(&dyn Snapshot) -> Result<()>) -> Result<()> {
        self.read_consistent(|reader| f(reader))
    }
}

impl Conversations for Store {
    fn session(&self, key: &str, persona: &str) -> Result<Session> {
        // An existing session is only read: opening one (as `strata mcp` does at start) must
        // not wait for another process's long write, nor need room on the disk.
        sessions::validate_session_key(key)?;
        if let Some(session) = self.read(|conn| sessions::by_key(conn, key))?
            && session.persona == persona
        {
            return Ok(session);
        }
        self.write(|tx| sessions::get_or_create(tx, key, persona, Utc::now()))
    }

    fn find_session(&self, key: &str) -> Result<Option<Session>> {
        self.read(|conn| sessions::by_key(conn, key))
    }

    fn session_by_id(&self, id: SessionId) -> Result<Session> {
        self.read(|conn| sessions::by_id(conn, id))
    }

    fn sessions(&self, persona: Option<&str>) -> Result<Vec<Session>> {
        self.read(|conn| sessions::list(conn, persona))
    }

    fn session_overviews(&self, persona: &str) -> Result<Vec<SessionOverview>> {
        self.read(|conn| sessions::overview(conn, persona))
    }

    /// A bot's message or two is indexed for search in the same transaction; a larger append
    /// is indexed after it commits, in batches of their own transactions, before this returns
    /// (see `search_index.rs`). A small append behind rows another writer is still indexing
    /// leaves its own to that writer, so a chat turn never does a bulk import's work.
    fn append(&self, session: SessionId, messages: &[NewMessage]) -> Result<Vec<MessageId>> {
        let small = messages.len() <= SYNC_INDEX_MAX;
        let ids = self.write(|tx| {
            sessions::by_id(tx, session)?;
            let index_now = small && Deferred::Messages.caught_up(tx)?;
            let ids = messages::append(tx, session, messages)?.ids;
            if index_now {
                Deferred::Messages.index(tx, ids.len())?;
            }
            Ok(ids)
        })?;
        if !small {
            self.catch_up_messages()?;
        }
        Ok(ids)
    }

    fn message(&self, id: MessageId) -> Result<Message> {
        self.read(|conn| messages::by_id(conn, id))
    }

    fn messages(&self, session: SessionId, seqs: RangeInclusive<i64>) -> Result<Vec<Message>> {
        outline::count(&self.rows_read, self.read(|conn| messages::range(conn, session, seqs)))
    }

    fn message_outline(&self, session: SessionId) -> Result<Vec<MessageOutline>> {
        outline::count(&self.rows_read, self.read(|conn| outline::outline(conn, session)))
    }

    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>> {
        outline::count(&self.rows_read, self.read(|conn| outline::live_outline(conn, session, head)))
    }

    fn recent_uncovered(&self, session: SessionId, limit: usize) -> Result<Vec<Message>> {
        self.read(|conn| sessions::recent_uncovered(conn, session, limit))
    }

    fn token_encoding(&self) -> Result<Option<String>> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached("SELECT encoding FROM token_encoding WHERE id = 1")?
                .query_row([], |row| row.get(0))
                .optional()?)
        })
    }

    fn claim_token_encoding(&self, encoding: &str) -> Result<String> {
        self.write(|tx| {
            tx.prepare_cached("INSERT OR IGNORE INTO token_encoding (id, encoding) VALUES (1, ?1)")?
                .execute([encoding])?;
            Ok(tx
                .prepare_cached("SELECT encoding FROM token_encoding WHERE id = 1")?
                .query_row([], |row| row.get(0))?)
        })
    }
}

impl Forest for Store {
    fn insert_leaves(
        &self,
        session: SessionId,
        leaves: &[(i64, i64, NewSummary)],
    ) -> Result<Vec<SummaryNode>> {
        self.write(|tx| {
            let now = Utc::now();
            leaves
                .iter()
                .map(|(first_seq, last_seq, summary)| {
                    forest::insert_leaf(tx, session, *first_seq, *last_seq, summary, now)
                })
                .collect()
        })
    }

    fn insert_leaf(
        &self,
        session: SessionId,
        first_seq: i64,
        last_seq: i64,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        self.write(|tx| forest::insert_leaf(tx, session, first_seq, last_seq, summary, Utc::now()))
    }

    fn merge(&self, children: &[NodeId], summary: &NewSummary) -> Result<SummaryNode> {
        self.write(|tx| forest::merge(tx, children, summary, Utc::now()))
    }

    fn replace_summary(
        &self,
        id: NodeId,
        expected_summarizer: &str,
        summary: &NewSummary,
    ) -> Result<SummaryNode> {
        self.write(|tx| forest::replace_summary(tx, id, expected_summarizer, summary, Utc::now()))
    }

    fn node(&self, id: NodeId) -> Result<SummaryNode> {
        self.read(|conn| forest::by_id(conn, id))
    }

    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>> {
        outline::count(&self.rows_read, self.read(|conn| forest::roots(conn, session, level)))
    }

    fn nodes(&self, session: SessionId) -> Result<Vec<SummaryNode>> {
        self.read(|conn| forest::all(conn, session))
    }

    fn children(&self, id: NodeId) -> Result<Vec<SummaryNode>> {
        self.read(|conn| forest::children(conn, id))
    }

    fn covered_messages(&self, node: NodeId) -> Result<Vec<Message>> {
        self.read(|conn| messages::covered_by(conn, node))
    }

    fn first_raw_archive(&self, session: SessionId) -> Result<Option<SummaryNode>> {
        self.read(|conn| forest::first_raw_archive(conn, session))
    }

    fn set_summarizer_failures(&self, session: SessionId, failures: u32) -> Result<()> {
        forest::set_summarizer_failures(self, session, failures)
    }

    fn count_rejection(&self, summarizer: &str, reason: &str) -> Result<()> {
        forest::count_rejection(self, summarizer, reason)
    }

    fn compaction_lease(&self, session: SessionId) -> Result<Option<Box<dyn Lease>>> {
        let mut path = self.path().as_os_str().to_owned();
        path.push(format!("-lease-{session}"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::Lease { path: path.clone().into(), source })?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(FileLease(file)))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(source)) => Err(Error::Lease { path: path.into(), source }),
        }
    }
}

impl Memories for Store {
    /// An update keeps the earlier text as a version ([`Memories::memory_history`]); whether
    /// the memory is new is decided inside the write transaction, so of several writers racing
    /// to create one key exactly one hears "new".
    fn save_memory(
        &self,
        writer: Writer,
        persona: &str,
        memory: &MemoryWrite<'_>,
        provenance: &Provenance,
    ) -> Result<(Memory, bool)> {
        self.write(|tx| agent_memories::upsert(tx, writer, persona, memory, provenance, Utc::now()))
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
            agent_memories::supersede(tx, writer, persona, category, key, with, at, provenance, Utc::now())
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
        self.write(|tx| agent_memories::merge(tx, persona, category, key, into, provenance, Utc::now()))
    }

    fn memory(&self, persona: &str, category: Category, key: &str) -> Result<Option<Memory>> {
        self.read(|conn| agent_memories::get(conn, persona, category, key))
    }

    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
        self.read(|conn| agent_memories::list(conn, persona, category))
    }

    fn memories_as_of(
        &self,
        persona: &str,
        category: Option<Category>,
        at: DateTime<Utc>,
    ) -> Result<Vec<Memory>> {
        self.read(|conn| agent_memories::list_as_of(conn, persona, category, at))
    }

    fn memory_history(&self, persona: &str, category: Category, key: &str) -> Result<Vec<MemoryVersion>> {
        self.read(|conn| agent_memories::history(conn, persona, category, key))
    }

    fn delete_memory(&self, writer: Writer, persona: &str, category: Category, key: &str) -> Result<bool> {
        self.write(|tx| agent_memories::delete(tx, writer, persona, category, key))
    }

    fn purge_memories(&self, category: Category, cutoff: DateTime<Utc>) -> Result<usize> {
        self.write(|tx| agent_memories::purge_older_than(tx, category, cutoff))
    }

    fn pending_updates(&self, limit: usize) -> Result<Vec<QueuedUpdate>> {
        self.read(|conn| queues::pending(conn, limit))
    }

    fn settle_update(&self, id: UpdateId) -> Result<()> {
        self.write(|tx| queues::settle(tx, id))
    }

    fn propose_preference(&self, id: UpdateId, key: &str, title: &str, content: &str) -> Result<()> {
        self.write(|tx| queues::propose(tx, id, key, title, content))
    }

    fn propose_stated(&self, persona: &str, update: &MemoryUpdate) -> Result<()> {
        self.write(|tx| queues::propose_stated(tx, persona, update, Utc::now()))
    }

    fn proposals(&self, persona: &str) -> Result<Vec<QueuedUpdate>> {
        self.read(|conn| queues::proposals(conn, persona))
    }

    fn accept_proposal(&self, persona: &str, key: &str) -> Result<Memory> {
        self.write(|tx| queues::accept(tx, persona, key, Utc::now()))
    }

    fn reject_proposal(&self, persona: &str, key: &str) -> Result<QueuedUpdate> {
        self.write(|tx| queues::reject(tx, persona, key))
    }
}

impl Search for Store {
    /// Indexes every message and summary node waiting for the search indexes, in batches of
    /// their own transactions. Writers call it (the bulk writer after its append, every
    /// compaction at its end), never a search; nothing to do (one cheap read per index) in the
    /// common case.
    fn catch_up_search_index(&self) -> Result<usize> {
        let summaries =
            if self.read(|conn| Deferred::Summaries.caught_up(conn))? { 0 } else { self.index_summaries()? };
        Ok(self.catch_up_messages()? + summaries)
    }

    /// It only reads: rows a bulk writer has not indexed yet are read and matched past the
    /// index, within the same snapshot, so they are found all the same.
    fn grep(&self, query: &TextQuery, filter: &SearchFilter) -> Result<Vec<TextHit>> {
        self.read(|conn| {
            // One snapshot for the unindexed rows, the cursor and the index, so a batch
            // indexed meanwhile is neither found twice nor missed.
            let snapshot = conn.unchecked_transaction()?;
            search::grep(&snapshot, query, filter)
        })
    }

    fn candidates(&self, query: &CandidateQuery<'_>) -> Result<Candidates> {
        Store::read_snapshot(self, |conn| search::ranked::candidates(conn, query))
    }

    /// It walks the `messages_created` index.
    fn said_between(&self, filter: &SearchFilter, oldest_first: bool, offset: usize) -> Result<Vec<TextHit>> {
        self.read(|conn| search::said_between(conn, filter, oldest_first, offset))
    }
}

impl Vectors for Store {
    fn use_space(&self, space: &EmbeddingSpace) -> Result<bool> {
        self.write(|tx| vectors::use_space(tx, space))
    }

    fn backlog_count(&self, persona: Option<&str>, session: Option<SessionId>) -> Result<u64> {
        self.read(|conn| vectors::backlog_count(conn, persona, session))
    }

    fn backlog(
        &self,
        persona: Option<&str>,
        session: Option<SessionId>,
        limit: usize,
    ) -> Result<Vec<BacklogItem>> {
        self.read(|conn| vectors::backlog_filtered(conn, persona, session, limit))
    }

    /// Vectors of a model other than the space's are refused.
    fn put_vectors(&self, model: &str, items: &[(BacklogItem, Vec<Vec<f32>>)]) -> Result<usize> {
        self.write(|tx| vectors::put(tx, model, items))
    }
}

impl Maintenance for Store {
    fn backup(&self, dest: &Path) -> Result<()> {
        self.read(|conn| check::backup(conn, dest))
    }

    fn import(&self, incoming: &[IncomingMessage]) -> Result<Imported> {
        self.append_many(incoming)
    }

    fn export_messages(&self, scope: ExportScope<'_>) -> Result<Vec<ExportedMessage>> {
        Store::export_messages(self, scope)
    }

    fn forget_plan(&self, scope: &ForgetScope) -> Result<ForgetPlan> {
        Store::forget_plan(self, scope)
    }

    fn forget(
        &self,
        scope: &ForgetScope,
        command: &str,
        rebuilt: &[Rebuilt],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Forgotten> {
        Store::forget(self, scope, command, rebuilt, progress)
    }

    fn forgets(&self) -> Result<Vec<ForgetRecord>> {
        Store::forgets(self)
    }

    fn read_dump(
        &self,
        f: &mut dyn FnMut(&dyn strata_seam::transfer::Source) -> Result<strata_seam::transfer::Copied>,
    ) -> Result<strata_seam::transfer::Copied> {
        f(&self.dump())
    }

    fn copy_from(
        &self,
        dump: &dyn strata_seam::transfer::Source,
        _name: &str,
        progress: &mut dyn FnMut(&str, u64),
    ) -> Result<strata_seam::transfer::Copied> {
        Store::copy_from(self, dump, progress)
    }

    fn record_llm_calls(&self, calls: &[LlmCall]) -> Result<()> {
        usage::record(self, calls)
    }

    fn stats(&self) -> Result<Stats> {
        self.read(|conn| {
            let count = |sql: &str| -> Result<u64> {
                Ok(conn.query_row(sql, [], |row| row.get::<_, i64>(0))? as u64)
            };
            let mut nodes_per_level = Vec::new();
            let mut stmt =
                conn.prepare("SELECT level, count(*) FROM summary_nodes GROUP BY level ORDER BY level")?;
            for row in
                stmt.query_map([], |row| Ok((row.get::<_, i64>(0)? as usize, row.get::<_, i64>(1)? as u64)))?
            {
                let (level, n) = row?;
                nodes_per_level.resize(level + 1, 0);
                nodes_per_level[level] = n;
            }
            let mut stmt = conn.prepare(
                "SELECT summarizer, count(*), SUM(source_token_count), SUM(token_count)
                 FROM summary_nodes GROUP BY summarizer ORDER BY count(*) DESC",
            )?;
            let summarizers = stmt
                .query_map([], |row| {
                    Ok(SummarizerStats {
                        summarizer: row.get(0)?,
                        nodes: row.get::<_, i64>(1)? as u64,
                        tokens_in: row.get::<_, i64>(2)? as u64,
                        tokens_out: row.get::<_, i64>(3)? as u64,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let totals = crate::metrics::row_totals(conn)?;
            Ok(Stats {
                sessions: totals.sessions,
                messages: totals.messages,
                compacted_messages: totals.compacted_messages,
                message_tokens: count("SELECT COALESCE(SUM(token_count), 0) FROM messages")?,
                nodes_per_level,
                memories: totals.memories,
                embedding_backlog: crate::vectors::backlog_count(conn, None, None)?,
                file_bytes: std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0),
                summarizers,
                rejections: rejections(conn)?,
            })
        })
    }

    fn metrics(&self) -> Result<StoreMetrics> {
        metrics::read(self)
    }

    fn usage_by_day(&self) -> Result<Vec<strata_seam::stats::UsageDay>> {
        crate::usage::by_day(self)
    }

    /// SQLite's own check is `quick_check`, or `integrity_check` when `full`; a commit lost
    /// with a damaged WAL is reported too.
    fn doctor(&self, full: bool) -> Result<Report> {
        let mut report = self.read(|conn| check::doctor(conn, full))?;
        let mut check = strata_seam::check::Check {
            name: "no committed write is missing (WAL)",
            problems: 0,
            details: Vec::new(),
            skipped: None,
        };
        // A damaged file cannot be trusted to answer (the SQLite check said so already).
        let lost = if report.healthy() { self.lost_commits()? } else { None };
        if let Some((found, recorded)) = lost {
            check.problems = recorded - found;
            check.details.push(format!(
                "the database holds {found} commits but {recorded} were made: the newest {} were lost with a \
                 damaged or truncated -wal (restore a backup, or `strata doctor --accept-lost-commits`)",
                recorded - found
            ));
        }
        report.checks.push(check);
        Ok(report)
    }
}
