//! What the database holds and what the work cost: [`Stats`] and [`StoreMetrics`].

/// The nodes one summarizer wrote at one level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeTotals {
    /// Model id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// The level.
    pub level: i64,
    /// Nodes.
    pub nodes: u64,
    /// Tokens of their sources (what was folded).
    pub source_tokens: u64,
    /// Tokens of the summaries (what replaced it).
    pub tokens: u64,
}

/// LLM calls of one purpose, caller and model, summed over time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallTotals {
    /// `summary` or `chat`.
    pub purpose: String,
    /// The summarizer's name, or `chat`.
    pub caller: String,
    /// The model.
    pub model: String,
    /// Calls.
    pub calls: u64,
    /// Failed calls.
    pub failures: u64,
    /// Prompt tokens the server reported.
    pub prompt_tokens: u64,
    /// Completion tokens the server reported.
    pub completion_tokens: u64,
    /// Milliseconds spent.
    pub millis: u64,
}

/// The stored results of one tool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolTotals {
    /// The tool's name.
    pub tool: String,
    /// Results stored.
    pub calls: u64,
    /// Of those, results that found something.
    pub hits: u64,
    /// Of those, error answers.
    pub errors: u64,
}

/// Everything [`Maintenance::metrics`](crate::Maintenance::metrics) reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreMetrics {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Messages covered by a Level-0 node.
    pub compacted_messages: u64,
    /// Memories.
    pub memories: u64,
    /// Nodes per summarizer and level.
    pub nodes: Vec<NodeTotals>,
    /// Summaries the quality gate refused, per summarizer and reason.
    pub rejections: Vec<(String, String, u64)>,
    /// LLM calls.
    pub calls: Vec<CallTotals>,
    /// Tool results stored, per tool.
    pub tools: Vec<ToolTotals>,
    /// Rows waiting for a vector.
    pub embedding_backlog: u64,
    /// Forgets done.
    pub forgets: u64,
    /// The database file's size.
    pub file_bytes: u64,
    /// The write-ahead log's size.
    pub wal_bytes: u64,
}

/// The row totals both `strata stats` and `strata metrics` report, from one query both
/// backends read alike (strata-store's `kinds::ROW_TOTALS`): what counts as a compacted
/// message is said once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowTotals {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Messages covered by a Level-0 node.
    pub compacted_messages: u64,
    /// Memories.
    pub memories: u64,
}

impl RowTotals {
    /// The totals from the query's four counts, in the order of the fields.
    pub fn from_counts([sessions, messages, compacted_messages, memories]: [i64; 4]) -> RowTotals {
        let n = |count: i64| count.max(0) as u64;
        RowTotals {
            sessions: n(sessions),
            messages: n(messages),
            compacted_messages: n(compacted_messages),
            memories: n(memories),
        }
    }
}

/// Counts for `strata stats`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Messages covered by a Level-0 node.
    pub compacted_messages: u64,
    /// Sum of cached message token counts.
    pub message_tokens: u64,
    /// Summary nodes per level, index = level.
    pub nodes_per_level: Vec<u64>,
    /// Agent memories.
    pub memories: u64,
    /// Rows waiting for a vector.
    pub embedding_backlog: u64,
    /// Size of the database file (without the WAL), in bytes.
    pub file_bytes: u64,
    /// What each summarizer has written: the compaction accounting.
    pub summarizers: Vec<SummarizerStats>,
    /// Summaries the quality gate refused, per summarizer and reason.
    pub rejections: Vec<RejectionCount>,
}

/// How many summaries of one summarizer the quality gate refused for one reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RejectionCount {
    /// Model id or `extractive`.
    pub summarizer: String,
    /// `empty`, `oversized`, `not_compressed`, `near_copy` or `malformed`.
    pub reason: String,
    /// Refusals so far.
    pub count: u64,
}

/// The work of one summarizer, derived from the nodes it wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SummarizerStats {
    /// Model id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// Nodes it wrote.
    pub nodes: u64,
    /// Tokens it was given (messages for Level-0 nodes, child summaries above).
    pub tokens_in: u64,
    /// Tokens it wrote.
    pub tokens_out: u64,
}
