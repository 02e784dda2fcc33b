//! The storage seam's maintenance role: what an operator does to a whole database rather than
//! what a running bot asks of it. Bringing transcripts in (ingest and the importers), taking a
//! persona or session out (export), erasing (forget) and copying a whole database into another
//! (`strata copy`, a fleet's backup) work alike on every backend, so a
//! fleet on PostgreSQL can do everything one SQLite file can.
//!
//! The rules live here once: which leading lines of a transcript a database already holds
//! ([`matching_run`], [`recognize_transcript`]), what a forget counts and the marker a rebuilt
//! node gets ([`withdrawn`]); a backend adds how its rows are read and written.

use std::path::Path;

use crate::check::Report;
use crate::dump::{Copied, Source};
use crate::error::Result;
use crate::export::{ExportScope, ExportedMessage};
use crate::forgetting::{ForgetPlan, ForgetRecord, ForgetScope, Forgotten, Rebuilt};
use crate::ingests::{Imported, IncomingMessage};
use crate::metrics::{Stats, StoreMetrics};
use crate::usage::{LlmCall, UsageDay};

pub use crate::forgetting::withdrawn;
pub use crate::ingests::{chain, line_digest, matching_run, recognize_transcript};
pub use crate::provenance::proposed_label;

/// Whole-database work: import, export, forget. Every method is one transaction; every error
/// leaves the database as it was.
pub trait Maintenance {
    /// Appends messages to sessions named by key, creating sessions as needed, all in one
    /// transaction. Idempotent: when every message of a session carries its line digest, the
    /// leading lines an earlier call stored for that session are skipped (the same transcript,
    /// or a longer version of it, adds only what is new; an edited one is refused naming the
    /// first message that differs); a message whose `external_id` its session holds is skipped.
    fn import(&self, incoming: &[IncomingMessage]) -> Result<Imported>;
    /// Every message of a persona or a session with every stored field, for a lossless
    /// export: sessions oldest first, each in seq order, from one snapshot.
    fn export_messages(&self, scope: ExportScope<'_>) -> Result<Vec<ExportedMessage>>;
    /// What [`Maintenance::forget`] would erase, changing nothing.
    fn forget_plan(&self, scope: &ForgetScope) -> Result<ForgetPlan>;
    /// Erases what `scope` names and everything derived from it in one transaction, leaving
    /// an audit row that records `command`, the counts and the time, and no content. `rebuilt`
    /// holds the caller's summaries for the plan's rebuild spans (a span without one gets a
    /// marker); `progress` hears (messages deleted, messages to delete). The backend then makes
    /// its files let go of the bytes as far as it can (see each backend's doc).
    fn forget(
        &self,
        scope: &ForgetScope,
        command: &str,
        rebuilt: &[Rebuilt],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Forgotten>;
    /// Every forget recorded, oldest first.
    fn forgets(&self) -> Result<Vec<ForgetRecord>>;
    /// Runs `f` over the whole database as a [`Source`] for a copy: one snapshot where the
    /// backend holds one for the whole read (PostgreSQL), each batch its own read where it
    /// does not (SQLite, whose consistent copy of a live file is `strata backup`).
    fn read_dump(&self, f: &mut dyn FnMut(&dyn Source) -> Result<Copied>) -> Result<Copied>;
    /// Copies everything `dump` reads into this database, every row with its id; `name`
    /// names the source for the record (a path, or a url without its password) and
    /// `progress` hears each table's name and its rows copied so far. SQLite takes the copy in
    /// one transaction into a database with no session; PostgreSQL in batches, resumable by
    /// running the same copy again (the target must be empty or a copy of `name`).
    fn copy_from(&self, dump: &dyn Source, name: &str, progress: &mut dyn FnMut(&str, u64))
    -> Result<Copied>;
    /// Writes a consistent copy of the whole database into the new SQLite file `dest`, which
    /// must not exist; a failed copy leaves no file. A backend without a file copy of its own
    /// ([`Maintenance::read_dump`]) is copied into the file in one transaction, every row with
    /// its id (strata-store's `backup_into`); SQLite copies its file with `VACUUM INTO` instead,
    /// safe while others write.
    fn backup(&self, dest: &Path) -> Result<()>;

    // Accounting and health.

    /// Records calls made to an LLM, in one transaction.
    fn record_llm_calls(&self, calls: &[LlmCall]) -> Result<()>;
    /// Counts of everything stored (`strata stats`).
    fn stats(&self) -> Result<Stats>;
    /// The totals `strata metrics` shows, derived from stored rows.
    fn metrics(&self) -> Result<StoreMetrics>;
    /// The calls made to LLMs, summed per day (UTC), purpose, caller and model, newest day
    /// first (`strata stats`).
    fn usage_by_day(&self) -> Result<Vec<UsageDay>>;
    /// `strata doctor`: checks the schema and every invariant over the stored rows, changing
    /// nothing. `full` also runs the database's own slowest check where it has one (SQLite's
    /// `integrity_check`).
    fn doctor(&self, full: bool) -> Result<Report>;
}
