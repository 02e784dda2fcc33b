//! The compactor's bookkeeping: consecutive summarizer failures per session, summaries the
//! quality gate refused per reason, and the raw archives waiting for a real summary. Grouped
//! behind [`Store::upkeep`], rather than on `Store` itself, since only the compactor needs
//! them (`strata stats` reads the refusals through [`Store::stats`]).

use chrono::Utc;
use rusqlite::OptionalExtension;

use crate::error::{Error, Missing, Result};
use crate::nodes;
use crate::store::Store;
use crate::types::{SessionId, SummaryNode};

/// The compactor's bookkeeping in one [`Store`] ([`Store::upkeep`]).
#[derive(Clone, Copy, Debug)]
pub struct Upkeep<'a> {
    store: &'a Store,
}

impl Store {
    /// The compactor's bookkeeping.
    pub fn upkeep(&self) -> Upkeep<'_> {
        Upkeep { store: self }
    }
}

impl Upkeep<'_> {
    /// Consecutive failed summarizer calls recorded for a session.
    pub fn summarizer_failures(&self, session: SessionId) -> Result<u32> {
        self.store.read(|conn| {
            let failures: Option<i64> = conn
                .prepare_cached("SELECT summarizer_failures FROM sessions WHERE id = ?1")?
                .query_row([session], |row| row.get(0))
                .optional()?;
            failures
                .map(|n| n.clamp(0, i64::from(u32::MAX)) as u32)
                .ok_or_else(|| Error::NotFound(Missing::Session(session)))
        })
    }

    /// Records the consecutive failed summarizer calls of a session (0 after a success).
    pub fn set_summarizer_failures(&self, session: SessionId, failures: u32) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached("UPDATE sessions SET summarizer_failures = ?2 WHERE id = ?1")?
                .execute(rusqlite::params![session, failures])?;
            Ok(())
        })
    }

    /// Counts one summary of `summarizer` refused by the quality gate for `reason`.
    pub fn count_rejection(&self, summarizer: &str, reason: &str) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO summary_rejections (summarizer, reason, count, last_at) VALUES (?1, ?2, 1, ?3)
                 ON CONFLICT (summarizer, reason) DO UPDATE SET count = count + 1, last_at = excluded.last_at",
            )?
            .execute(rusqlite::params![summarizer, reason, crate::types::to_unix(Utc::now())])?;
            Ok(())
        })
    }

    /// The first `raw-archive` node of a session, by level then position (an index lookup).
    pub fn first_raw_archive(&self, session: SessionId) -> Result<Option<SummaryNode>> {
        self.store.read(|conn| nodes::first_raw_archive(conn, session))
    }
}
