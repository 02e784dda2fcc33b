//! The recalled block's search result: the one type that recall's search fills and the
//! compactor's assembly lays out, so neither crate depends on the other.

use chrono::{DateTime, Utc};

use crate::types::{MemoryId, MessageId};

/// What a search of a persona's history found on a request: found by recall's `proactive`,
/// handed by the engine to the compactor's layout (`strata_compactor::Assembler::lay_out`),
/// which shows it as the recalled block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recalled {
    /// Messages, best first.
    pub hits: Vec<RecalledHit>,
    /// The persona's memories the search ranked, most relevant first: a bootstrap turn's
    /// `[Long-term Memories]` shows these before the others.
    pub memories: Vec<MemoryId>,
    /// What the search could not cover, in words (semantic search over part of the history
    /// only, or not at all), shown with the block.
    pub partial: Option<String>,
    /// One sentence saying how the model opens a hit whole (it names the tool).
    pub how_to_open: String,
}

/// One message the search found.
#[derive(Clone, Debug, PartialEq)]
pub struct RecalledHit {
    /// The message.
    pub message_id: MessageId,
    /// Its session's key.
    pub session: String,
    /// Its position in that session.
    pub seq: i64,
    /// When it was sent.
    pub timestamp: DateTime<Utc>,
    /// Its speaker: the participant's name, else its role.
    pub speaker: String,
    /// Its text.
    pub text: String,
    /// The search's fused score (relative to the other candidates).
    pub score: f64,
    /// Cosine similarity of the message to the request, when the semantic side found it.
    pub similarity: Option<f64>,
}
