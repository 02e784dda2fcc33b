//! Compacting a session until nothing is pending: `strata compact`, the demo, bulk imports.

use serde::Serialize;
use strata_seam::SessionId;

use crate::compactor::{Compactor, Outcome};
use crate::error::Result;

/// What [`Compactor::compact_until_done`] did, summed over its calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compaction {
    /// Bounded compaction calls made.
    pub calls: u32,
    /// Nodes written: Level-0 nodes and merges, raw archives included.
    pub nodes_created: u32,
    /// Of those, `raw-archive` digests written because the summarizer was down.
    pub raw_archived: u32,
    /// Messages newly covered by Level-0 nodes.
    pub messages_folded: u64,
    /// Tokens of the unabridged context before the first call that wrote a node; `None` when
    /// no call did.
    pub tokens_before: Option<u64>,
    /// Tokens of the unabridged context after the last call that wrote a node.
    pub tokens_after: Option<u64>,
    /// How the last call ended.
    pub last: Outcome,
}

impl Compactor {
    /// Compacts `session` call after call, each one [`Compactor::compact_rounds`] of at most
    /// `rounds_per_call` summaries, until a call ends with nothing pending or `max_calls` calls
    /// were made. Each call plans once, so a year of history is read a few dozen times rather
    /// than once per chunk. `progress` hears the running totals after every call (a caller
    /// that fails on an error still knows what was written before it).
    ///
    /// It ends: a call that leaves work pending wrote a node, and a session holds finitely
    /// many messages to fold and roots to merge.
    pub async fn compact_until_done(
        &self,
        session: SessionId,
        rounds_per_call: u32,
        max_calls: u32,
        mut progress: impl FnMut(&Compaction),
    ) -> Result<Compaction> {
        let mut done = Compaction {
            calls: 0,
            nodes_created: 0,
            raw_archived: 0,
            messages_folded: 0,
            tokens_before: None,
            tokens_after: None,
            last: Outcome::NoCandidate,
        };
        loop {
            done.last = self.compact_rounds(session, rounds_per_call).await?;
            done.calls += 1;
            let pending = match &done.last {
                Outcome::Compacted {
                    nodes_created,
                    raw_archived,
                    messages_folded,
                    tokens_before,
                    tokens_after,
                    pending,
                    ..
                } => {
                    done.nodes_created += nodes_created;
                    done.raw_archived += raw_archived;
                    done.messages_folded += messages_folded;
                    done.tokens_before.get_or_insert(*tokens_before);
                    done.tokens_after = Some(*tokens_after);
                    *pending
                }
                _ => false,
            };
            progress(&done);
            if !pending || done.calls >= max_calls {
                return Ok(done);
            }
        }
    }
}
