//! The cursors of the deferred search indexes: messages (schema 8) and summary nodes
//! (schema 10) are written without their full-text index entries and indexed afterwards, in
//! batches, by one statement per index. Rows of both tables are never deleted and their ids
//! only grow, so a cursor says what is indexed: every row with `id <= indexed_through`.
//!
//! Readers never write: the indexes are caught up by writers, in batches of their own
//! transactions, never by a search.
//!
//! - `Backend::append` of more than a bot's few messages catches up before it returns;
//!   `Store::append_many` (the bulk import) leaves it to its caller, which `strata ingest`
//!   does with a progress bar (`Store::index_messages` in a loop) and every other caller
//!   through `Backend::catch_up_search_index`. A million-message import is thus one transaction
//!   for the rows (all or nothing) and then short ones of a few thousand rows, between which
//!   other writers get the lock.
//! - Every compaction call ends by catching up both indexes, so rows a crashed writer left
//!   behind are indexed by the next compaction.
//!
//! A search in the meantime is complete without writing: `memory_grep` reads the rows past
//! the cursor (the unindexed tail, newest first, within its persona, session and time) and
//! matches them in Rust, folding case and diacritics as the trigram index does, before it
//! asks the index for the rest; since ids only grow, the tail holds the newest rows and the
//! two parts together are what the caught-up index would answer. The ranked side of
//! `memory_search` (bm25 over the word index) reads the index alone: bm25 needs the index's
//! statistics, and the same rows reach the semantic side only once they have vectors, later
//! still; a row appended in bulk is ranked once its writer's catch-up, seconds after its
//! commit, reaches it.

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::kinds::Kind;
use crate::search::HitKind;

/// A table whose rows are indexed after they are written.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deferred {
    /// `messages`, into the trigram and the word index.
    Messages,
    /// `summary_nodes`, into the trigram and the word index.
    Summaries,
}

impl Deferred {
    pub(crate) const ALL: [Deferred; 2] = [Deferred::Messages, Deferred::Summaries];

    /// What the table is.
    fn kind(self) -> &'static Kind {
        Kind::of(match self {
            Deferred::Messages => HitKind::Message,
            Deferred::Summaries => HitKind::Summary,
        })
    }

    /// The base table and the table holding its cursor.
    fn tables(self) -> (&'static str, &'static str) {
        let cursor = match self {
            Deferred::Messages => "message_index",
            Deferred::Summaries => "summary_index",
        };
        (self.kind().table, cursor)
    }

    /// The table holding the cursor (absent before its schema version).
    pub(crate) fn cursor_table(self) -> &'static str {
        self.tables().1
    }

    /// The statements that index the rows with `?1 < id <= ?2`: the trigram index takes the
    /// columns it was declared with, the word index the kind's ranked text (a message with
    /// its speaker).
    fn inserts(self) -> [String; 2] {
        let kind = self.kind();
        let rows = format!(
            "FROM {table} {alias} WHERE {id} > ?1 AND {id} <= ?2 ORDER BY {id}",
            table = kind.table,
            alias = kind.alias,
            id = kind.id()
        );
        let trigram_columns: Vec<&str> =
            kind.trigram_columns.iter().map(|column| column.rsplit('.').next().unwrap_or(column)).collect();
        [
            format!(
                "INSERT INTO {trigram}(rowid, {columns}) SELECT {id}, {values} {rows}",
                trigram = kind.trigram,
                columns = trigram_columns.join(", "),
                id = kind.id(),
                values = kind.text_columns.join(", "),
            ),
            format!(
                "INSERT INTO {words}(rowid, text) SELECT {id}, {text} {rows}",
                words = kind.words,
                id = kind.id(),
                text = kind.ranked_text,
            ),
        ]
    }

    /// The trigram and the word index of the table.
    pub(crate) fn indexes(self) -> [&'static str; 2] {
        let kind = self.kind();
        [kind.trigram, kind.words]
    }

    /// Rebuilds both indexes from the rows that remain (`strata forget`: their old pages are
    /// freed, and zeroed by `secure_delete`); every row is then indexed, so the cursor moves to
    /// the newest id.
    pub(crate) fn rebuild(self, conn: &Connection) -> Result<()> {
        let kind = self.kind();
        let (table, cursor) = self.tables();
        conn.execute_batch(&format!(
            "INSERT INTO {trigram}({trigram}) VALUES ('rebuild');
             INSERT INTO {words}({words}) VALUES ('delete-all');
             INSERT INTO {words}(rowid, text) SELECT {id}, {text} FROM {table} {alias} ORDER BY {id};
             UPDATE {cursor} SET indexed_through = MAX(indexed_through, COALESCE((SELECT MAX(id) FROM {table}), 0));",
            trigram = kind.trigram,
            words = kind.words,
            id = kind.id(),
            text = kind.ranked_text,
            alias = kind.alias,
        ))?;
        Ok(())
    }

    /// The statement's clause for the rows past the cursor, for a base-table `id` column.
    pub(crate) fn tail_condition(self, id: &str) -> String {
        format!("{id} > (SELECT indexed_through FROM {} WHERE id = 1)", self.cursor_table())
    }

    /// Rows not yet in the search indexes.
    pub(crate) fn unindexed(self, conn: &Connection) -> Result<u64> {
        let (table, cursor) = self.tables();
        let count: i64 = conn
            .prepare_cached(&format!(
                "SELECT count(*) FROM {table} WHERE id > (SELECT indexed_through FROM {cursor} WHERE id = 1)"
            ))?
            .query_row([], |row| row.get(0))?;
        Ok(count as u64)
    }

    /// True when every row is in the search indexes: one indexed lookup, whatever waits.
    pub(crate) fn caught_up(self, conn: &Connection) -> Result<bool> {
        let (table, cursor) = self.tables();
        let waiting: bool = conn
            .prepare_cached(&format!(
                "SELECT EXISTS (SELECT 1 FROM {table}
                                WHERE id > (SELECT indexed_through FROM {cursor} WHERE id = 1))"
            ))?
            .query_row([], |row| row.get(0))?;
        Ok(!waiting)
    }

    /// Indexes up to `limit` of the oldest unindexed rows (in every index of the table) and
    /// moves the cursor past them; returns how many. Call in an immediate transaction.
    pub(crate) fn index(self, conn: &Connection, limit: usize) -> Result<usize> {
        let (table, cursor_table) = self.tables();
        let cursor: i64 = conn
            .prepare_cached(&format!("SELECT indexed_through FROM {cursor_table} WHERE id = 1"))?
            .query_row([], |row| row.get(0))?;
        let last: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT max(id) FROM (SELECT id FROM {table} WHERE id > ?1 ORDER BY id LIMIT ?2)"
            ))?
            .query_row(params![cursor, limit as i64], |row| row.get(0))?;
        let Some(last) = last else { return Ok(0) };
        let mut indexed = 0;
        for insert in self.inserts() {
            indexed = conn.prepare_cached(&insert)?.execute(params![cursor, last])?;
        }
        conn.prepare_cached(&format!("UPDATE {cursor_table} SET indexed_through = ?1 WHERE id = 1"))?
            .execute([last])?;
        Ok(indexed)
    }
}
