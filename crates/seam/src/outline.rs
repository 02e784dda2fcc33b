//! A message without its text: what assembly and the compactor plan with.

use chrono::{DateTime, Utc};

use crate::types::{MessageId, NodeId, Role};

/// A message without its text: what the compactor needs to plan cuts and budgets.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageOutline {
    /// Database id.
    pub id: MessageId,
    /// 0-based position in its session.
    pub seq: i64,
    /// Who sent it.
    pub role: Role,
    /// Cached token count.
    pub token_count: u32,
    /// Never compacted.
    pub pinned: bool,
    /// The Level-0 node covering it, if any.
    pub summary_id: Option<NodeId>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
}
