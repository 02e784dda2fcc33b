//! Context assembly: head, scaffold, acknowledgement, buffer, tail, inside the budget, in two
//! one-way steps with the recalled block's search between them.
//!
//! [`Assembler::read`] takes the one snapshot a context is laid out from (`snapshot.rs`); the
//! caller asks its search for the recalled block with what the snapshot says
//! ([`ContextSnapshot::recall_request`]); [`Assembler::lay_out`] turns snapshot and block into
//! the context, a pure function of its inputs that reads and calls nothing. The compactor so
//! never calls back into the engine, and the engine never reaches inside the layout.
//!
//! The layout's stages, a module each: `slot.rs` renders one message as sent and counts it,
//! `preamble.rs` fills the newest request's injection, `window.rs` decides what each stored
//! message is shown as, `budget.rs` leaves out what does not fit, `recalled.rs` lays the block
//! into the room left, and `layout.rs` runs them in order and cuts the prefix a provider's
//! cache keys on. What a caller gets back is `context.rs`.
//!
//! The scaffold depends only on the forest and the configuration, never on the buffer: that
//! keeps head + scaffold + acknowledgement byte-identical between compactions, the prompt-cache
//! prefix. An oversized protected message becomes a stub naming the exact `view_message`
//! paging calls only when head and tail would not fit otherwise (never the request being
//! answered); if head + tail alone do not fit, `Error::ContextTooLarge`.

mod budget;
mod context;
mod layout;
mod preamble;
mod recalled;
mod slot;
mod snapshot;
mod window;

use chrono::{DateTime, Utc};
use strata_seam::search::Recalled;
use strata_seam::{NewMessage, SessionId, SharedBackend};

use crate::config::CompactorSettings;
use crate::error::Result;
use crate::tokens::TokenCounter;

pub(crate) use self::budget::unabridged_tokens;
pub use self::context::{AssembledContext, ContextEntry, Injection, Original, Part, TokenAccounting};
pub use self::preamble::{PLACEHOLDERS, REGULAR_TEMPLATE, bootstrap_template};
pub use self::recalled::{RecalledBlock, ShownHit};
pub use self::snapshot::{ContextSnapshot, RecallRequest};

/// Assembles the context of a session, what is sent to the model. It needs no summarizer;
/// every [`Compactor`](crate::Compactor) holds one.
#[derive(Clone, Debug)]
pub struct Assembler {
    store: SharedBackend,
    config: CompactorSettings,
    counter: TokenCounter,
}

impl Assembler {
    /// An assembler over `store` with the budget and token encoding of `config` (refused when
    /// the database counts with another, [`crate::Error::EncodingMismatch`]).
    pub fn new(store: impl Into<SharedBackend>, config: CompactorSettings) -> Result<Assembler> {
        let store = store.into();
        let counter = config.token_counter();
        counter.check(&*store)?;
        Ok(Assembler { store, config, counter })
    }

    /// The context to send for a session at time `now` (which decides which user preferences
    /// have expired): head, scaffold, acknowledgement, buffer and tail, inside the budget, with
    /// no recalled block. Blocking: async callers go through
    /// [`Compactor::assemble`](crate::Compactor::assemble).
    ///
    /// It takes no compaction lock: the snapshot is one read transaction, so a compaction (of
    /// this process or another) lands wholly before or after it, and assembly never waits for
    /// a summarizer that a running compaction is waiting on.
    pub fn assemble_blocking(&self, session: SessionId, now: DateTime<Utc>) -> Result<AssembledContext> {
        let snapshot = self.read(session, &AssemblyOptions::at(now))?;
        self.lay_out(&snapshot, None)
    }

    /// What the context of `session` is laid out from, as `options` say (a request not
    /// stored joins it as the next message: a dry run), in one read transaction. Blocking.
    pub fn read(&self, session: SessionId, options: &AssemblyOptions) -> Result<ContextSnapshot> {
        let mut request = options.request.clone();
        if let Some(request) = request.as_mut() {
            self.config.check_message_size(request)?;
            self.counter.count_new(request);
        }
        let (snapshot, ()) =
            ContextSnapshot::read(&*self.store, session, &self.config, options.now, request, |_| Ok(()))?;
        Ok(snapshot)
    }

    /// What assembly reads of `session` at `now`, no request pending, and `also` from the same
    /// snapshot: the compactor's check that it has nothing to write.
    pub(crate) fn read_also<T>(
        &self,
        session: SessionId,
        now: DateTime<Utc>,
        also: impl FnOnce(&dyn strata_seam::Snapshot) -> strata_seam::Result<T>,
    ) -> Result<(ContextSnapshot, T)> {
        ContextSnapshot::read(&*self.store, session, &self.config, now, None, also)
    }

    /// The context laid out from `snapshot` and `recalled`, what the caller's search found for
    /// [`ContextSnapshot::recall_request`] (`None`: no recalled block). It reads nothing and
    /// calls nothing back, so it may run anywhere; it only counts tokens.
    pub fn lay_out(
        &self,
        snapshot: &ContextSnapshot,
        recalled: Option<Recalled>,
    ) -> Result<AssembledContext> {
        layout::lay_out(snapshot, recalled, &self.config, &self.counter)
    }
}

/// What one assembly reads besides the stored session.
#[derive(Clone, Debug)]
pub struct AssemblyOptions {
    /// The time of the request: it decides which preferences have expired.
    pub now: DateTime<Utc>,
    /// A request that is not stored: the context is laid out as if it were the session's next
    /// message, nothing is written (a dry run). Its entry has no message id.
    pub request: Option<NewMessage>,
}

impl AssemblyOptions {
    /// The stored session at `now`.
    pub fn at(now: DateTime<Utc>) -> AssemblyOptions {
        AssemblyOptions { now, request: None }
    }
}
