//! The shapes strata answers with at its edges: the dicts of the Python package, the objects of
//! the Node addon, the bodies of `strata serve`'s REST routes and the output of the command
//! line's `--json`. Each edge converts the seam's rows into these and serializes only these, so
//! a column added to a table, or a field renamed in a row, changes no answer by accident.
//!
//! The shapes are versioned together by [`WIRE_VERSION`]: Python's `strata.WIRE_VERSION`, the
//! Node addon's `wireVersion()`, the `info.x-wire-version` of `strata serve`'s OpenAPI document
//! and its `Strata-Wire-Version` header, and `strata --version --json` all say it. It goes up
//! when a field is removed or renamed, or its type or meaning changes; a new field, a new shape or
//! a new route does not change it.
//!
//! Field values are JSON: ids and counts are numbers, times are RFC 3339 text in UTC, roles,
//! categories and sources are their lowercase names.
//!
//! The LLM's tool answers (`strata_recall::tools`) are a format of their own, the model's; they
//! are not these shapes and are not versioned by [`WIRE_VERSION`].

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use strata_seam::check::Report;
use strata_seam::forgetting as forget;
use strata_seam::memories::{Edit, Provenance as StoreProvenance, QueuedUpdate, Source, UpdateId};
use strata_seam::stats::{Stats as StoreStats, StoreMetrics, UsageDay as StoreUsageDay};
use strata_seam::{
    Category, Level, MemoryId, MessageId, NodeId, Role, SessionId, SessionOverview as StoreOverview,
};

/// The version of the shapes of this module. See the module's documentation for what changes it.
pub const WIRE_VERSION: u32 = 1;

/// A conversation (`Engine.sessions`, `GET /v1/personas/{persona}/sessions/{session}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Session {
    /// The database's id for it.
    pub id: SessionId,
    /// The caller's key for it.
    pub key: String,
    /// The persona it belongs to, for its whole life.
    pub persona: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its newest message was sent.
    pub last_active_at: DateTime<Utc>,
}

impl From<&strata_seam::Session> for Session {
    fn from(row: &strata_seam::Session) -> Session {
        Session {
            id: row.id,
            key: row.key.clone(),
            persona: row.persona.clone(),
            created_at: row.created_at,
            last_active_at: row.last_active_at,
        }
    }
}

/// A session with its message counts (`GET /v1/personas/{persona}/sessions`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionOverview {
    /// The database's id for it.
    pub id: SessionId,
    /// The caller's key for it.
    pub key: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its newest message was sent.
    pub last_active_at: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: u64,
    /// How many of them no summary covers yet.
    pub uncompacted_messages: u64,
}

impl From<&StoreOverview> for SessionOverview {
    fn from(row: &StoreOverview) -> SessionOverview {
        SessionOverview {
            id: row.id,
            key: row.key.clone(),
            created_at: row.created_at,
            last_active_at: row.last_active_at,
            messages: row.messages,
            uncompacted_messages: row.uncompacted_messages,
        }
    }
}

/// A stored message (`Session.messages`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// The database's id for it, unique across the database.
    pub id: MessageId,
    /// The session it belongs to.
    pub session_id: SessionId,
    /// Its 0-based position in the session.
    pub seq: i64,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: Role,
    /// Its text, verbatim.
    pub content: String,
    /// The tool calls of an assistant message, as the OpenAI `tool_calls` array.
    pub tool_calls: Option<Value>,
    /// For a tool result, the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// The participant's or tool's name, when it was given one.
    pub name: Option<String>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
    /// Its size in tokens.
    pub token_count: u32,
    /// Whether it is kept out of compaction.
    pub pinned: bool,
    /// The level-0 summary that covers it; `null` until it is compacted.
    pub summary_id: Option<NodeId>,
    /// The message object as the caller sent it, when the fields above do not say all of it
    /// (reasoning, media, Anthropic blocks, a Responses item); absent otherwise. The store keeps
    /// it as JSON text; it is answered as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_sent: Option<Value>,
}

impl From<&strata_seam::Message> for Message {
    fn from(row: &strata_seam::Message) -> Message {
        Message {
            id: row.id,
            session_id: row.session_id,
            seq: row.seq,
            role: row.role,
            content: row.content.clone(),
            tool_calls: row.tool_calls.clone(),
            tool_call_id: row.tool_call_id.clone(),
            name: row.name.clone(),
            created_at: row.created_at,
            token_count: row.token_count,
            pinned: row.pinned,
            summary_id: row.summary_id,
            as_sent: row.body.as_deref().and_then(|body| serde_json::from_str(body).ok()),
        }
    }
}

/// A node of a session's summary forest (`strata compact --tree --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryNode {
    /// The database's id for it.
    pub id: NodeId,
    /// The session whose messages it covers.
    pub session_id: SessionId,
    /// 0 for a node over messages, L+1 for a node over level-L nodes.
    pub level: Level,
    /// The node one level up it was merged into; `null` for a root.
    pub parent_id: Option<NodeId>,
    /// One sentence.
    pub headline: String,
    /// The structured summary.
    pub body: String,
    /// The seq of the first message it covers.
    pub first_seq: i64,
    /// The seq of the last message it covers (inclusive).
    pub last_seq: i64,
    /// When the first covered message was sent.
    pub start_time: DateTime<Utc>,
    /// When the last covered message was sent.
    pub end_time: DateTime<Utc>,
    /// Tokens of headline and body.
    pub token_count: u32,
    /// Tokens of what it summarizes.
    pub source_token_count: u32,
    /// Who wrote it: a model's id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

impl From<&strata_seam::SummaryNode> for SummaryNode {
    fn from(row: &strata_seam::SummaryNode) -> SummaryNode {
        SummaryNode {
            id: row.id,
            session_id: row.session_id,
            level: row.level,
            parent_id: row.parent_id,
            headline: row.headline.clone(),
            body: row.body.clone(),
            first_seq: row.first_seq,
            last_seq: row.last_seq,
            start_time: row.start_time,
            end_time: row.end_time,
            token_count: row.token_count,
            source_token_count: row.source_token_count,
            summarizer: row.summarizer.clone(),
            created_at: row.created_at,
        }
    }
}

/// Where a memory's text came from. Fields that do not apply are absent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Provenance {
    /// `user`, `agent`, `summary`, `proposal` or `unknown` (written before strata recorded it).
    pub source: Source,
    /// The command or tool it came through (`strata memory set`, `save_memory`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The session of the tool call or of the summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// The summary node it was consolidated from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// The first seq of the messages that node covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<i64>,
    /// The last seq of the messages that node covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<i64>,
    /// The message of the agent's tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageId>,
    /// The tool call's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl From<&StoreProvenance> for Provenance {
    fn from(row: &StoreProvenance) -> Provenance {
        Provenance {
            source: row.source,
            via: row.via.clone(),
            session: row.session,
            node: row.node,
            first_seq: row.first_seq,
            last_seq: row.last_seq,
            message: row.message,
            tool_call_id: row.tool_call_id.clone(),
        }
    }
}

/// A memory of a persona (`Engine.memory`, `Engine.memories`, `GET .../memories`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Memory {
    /// The database's id for it.
    pub id: MemoryId,
    /// `user_preferences`, `progress` or `memo`.
    pub category: Category,
    /// Its snake_case key, unique per category and persona.
    pub key: String,
    /// A human-readable label.
    pub title: String,
    /// The fact, at most 500 characters.
    pub content: String,
    /// When it was last written.
    pub updated_at: DateTime<Utc>,
    /// The persona it belongs to.
    pub persona: String,
    /// Where its current text came from, when the read included it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// Since when its text is true.
    pub valid_from: DateTime<Utc>,
    /// When its text stopped being true; absent while it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
}

impl From<&strata_seam::Memory> for Memory {
    fn from(row: &strata_seam::Memory) -> Memory {
        Memory {
            id: row.id,
            category: row.category,
            key: row.key.clone(),
            title: row.title.clone(),
            content: row.content.clone(),
            updated_at: row.updated_at,
            persona: row.persona.clone(),
            provenance: row.provenance.as_ref().map(Provenance::from),
            valid_from: row.valid_from,
            valid_to: row.valid_to,
        }
    }
}

/// A memory written by `Engine.save_memory`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SavedMemory {
    /// The memory as stored.
    pub memory: Memory,
    /// True when its key was new, false when an existing memory was updated.
    pub created: bool,
}

/// One version of a memory (`strata memory history --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryVersion {
    /// Its title then.
    pub title: String,
    /// Its content then.
    pub content: String,
    /// When it was written.
    pub written_at: DateTime<Utc>,
    /// When an update replaced it; `null` for the current version.
    pub replaced_at: Option<DateTime<Utc>>,
    /// Since when it was true.
    pub valid_from: DateTime<Utc>,
    /// Until when it was true; `null` while it is.
    pub valid_to: Option<DateTime<Utc>>,
    /// Where it came from.
    pub provenance: Provenance,
}

impl From<&strata_seam::memories::MemoryVersion> for MemoryVersion {
    fn from(row: &strata_seam::memories::MemoryVersion) -> MemoryVersion {
        MemoryVersion {
            title: row.title.clone(),
            content: row.content.clone(),
            written_at: row.written_at,
            replaced_at: row.replaced_at,
            valid_from: row.valid_from,
            valid_to: row.valid_to,
            provenance: Provenance::from(&row.provenance),
        }
    }
}

/// A fact a summary found, waiting: a preference proposed to the user (`Engine.proposals`,
/// `reject_proposal`), or a fact not yet settled into memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Proposal {
    /// The database's id for it.
    pub id: UpdateId,
    /// The persona it belongs to.
    pub persona: String,
    /// The summary node that found it; `null` once that node is gone.
    pub node_id: Option<NodeId>,
    /// The category of the memory it would write.
    pub category: Category,
    /// The key of the memory it would write.
    pub key: String,
    /// A human-readable label.
    pub title: String,
    /// The fact.
    pub content: String,
    /// `add`, `update` or `supersede`, when the summarizer said which; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edit: Option<Edit>,
    /// True for a proposal waiting for the user, false for a fact not yet settled.
    pub proposed: bool,
    /// When the summary found it.
    pub created_at: DateTime<Utc>,
}

impl From<&QueuedUpdate> for Proposal {
    fn from(row: &QueuedUpdate) -> Proposal {
        Proposal {
            id: row.id,
            persona: row.persona.clone(),
            node_id: row.node_id,
            category: row.update.category,
            key: row.update.key.clone(),
            title: row.update.title.clone(),
            content: row.update.content.clone(),
            edit: row.update.edit,
            proposed: row.proposed,
            created_at: row.created_at,
        }
    }
}

/// The database's counts (`Engine.stats`, `strata stats --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Messages a level-0 summary covers.
    pub compacted_messages: u64,
    /// Tokens of every message.
    pub message_tokens: u64,
    /// Summary nodes per level, the index being the level.
    pub nodes_per_level: Vec<u64>,
    /// Memories.
    pub memories: u64,
    /// Rows waiting for a vector.
    pub embedding_backlog: u64,
    /// The database file's size in bytes (without its write-ahead log).
    pub file_bytes: u64,
    /// What each summarizer wrote.
    pub summarizers: Vec<SummarizerStats>,
    /// Summaries the quality gate refused, per summarizer and reason.
    pub rejections: Vec<Rejections>,
    /// LLM calls per day (`strata stats --json` only; absent elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_usage: Option<Vec<UsageDay>>,
}

impl From<&StoreStats> for Stats {
    fn from(row: &StoreStats) -> Stats {
        Stats {
            sessions: row.sessions,
            messages: row.messages,
            compacted_messages: row.compacted_messages,
            message_tokens: row.message_tokens,
            nodes_per_level: row.nodes_per_level.clone(),
            memories: row.memories,
            embedding_backlog: row.embedding_backlog,
            file_bytes: row.file_bytes,
            summarizers: row
                .summarizers
                .iter()
                .map(|s| SummarizerStats {
                    summarizer: s.summarizer.clone(),
                    nodes: s.nodes,
                    tokens_in: s.tokens_in,
                    tokens_out: s.tokens_out,
                })
                .collect(),
            rejections: row
                .rejections
                .iter()
                .map(|r| Rejections {
                    summarizer: r.summarizer.clone(),
                    reason: r.reason.clone(),
                    count: r.count,
                })
                .collect(),
            llm_usage: None,
        }
    }
}

/// What one summarizer wrote.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummarizerStats {
    /// A model's id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// Nodes it wrote.
    pub nodes: u64,
    /// Tokens it was given.
    pub tokens_in: u64,
    /// Tokens it wrote.
    pub tokens_out: u64,
}

/// How many summaries of one summarizer the quality gate refused for one reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rejections {
    /// A model's id or `extractive`.
    pub summarizer: String,
    /// `empty`, `oversized`, `not_compressed`, `near_copy` or `malformed`.
    pub reason: String,
    /// Refusals so far.
    pub count: u64,
}

/// The LLM calls of one day, purpose, caller and model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UsageDay {
    /// The day (UTC), `YYYY-MM-DD`.
    pub day: String,
    /// `summary` or `chat`.
    pub purpose: String,
    /// The summarizer's name, or `chat`.
    pub caller: String,
    /// The model asked.
    pub model: String,
    /// Calls.
    pub calls: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Prompt tokens the server reported.
    pub prompt_tokens: u64,
    /// Completion tokens the server reported.
    pub completion_tokens: u64,
    /// Milliseconds spent.
    pub millis: u64,
    /// Prompt tokens strata counted.
    pub counted_prompt_tokens: u64,
    /// Completion tokens strata counted.
    pub counted_completion_tokens: u64,
}

impl From<&StoreUsageDay> for UsageDay {
    fn from(row: &StoreUsageDay) -> UsageDay {
        let totals = &row.totals;
        UsageDay {
            day: row.day.clone(),
            purpose: totals.purpose.clone(),
            caller: totals.caller.clone(),
            model: totals.model.clone(),
            calls: totals.calls,
            failures: totals.failures,
            prompt_tokens: totals.prompt_tokens,
            completion_tokens: totals.completion_tokens,
            millis: totals.millis,
            counted_prompt_tokens: row.counted_prompt_tokens,
            counted_completion_tokens: row.counted_completion_tokens,
        }
    }
}

/// The totals behind `strata metrics` (`strata metrics --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metrics {
    /// Sessions.
    pub sessions: u64,
    /// Messages.
    pub messages: u64,
    /// Messages a level-0 summary covers.
    pub compacted_messages: u64,
    /// Memories.
    pub memories: u64,
    /// Summary nodes per summarizer and level.
    pub nodes: Vec<NodeTotals>,
    /// Summaries the quality gate refused: `[summarizer, reason, count]`.
    pub rejections: Vec<(String, String, u64)>,
    /// LLM calls per purpose, caller and model.
    pub calls: Vec<CallTotals>,
    /// Tool results stored, per tool.
    pub tools: Vec<ToolTotals>,
    /// Rows waiting for a vector.
    pub embedding_backlog: u64,
    /// Forgets done.
    pub forgets: u64,
    /// The database file's size in bytes.
    pub file_bytes: u64,
    /// The write-ahead log's size in bytes.
    pub wal_bytes: u64,
}

/// The summary nodes one summarizer wrote at one level.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeTotals {
    /// A model's id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// The level.
    pub level: i64,
    /// Nodes.
    pub nodes: u64,
    /// Tokens of what they summarize.
    pub source_tokens: u64,
    /// Tokens of the summaries.
    pub tokens: u64,
}

/// The LLM calls of one purpose, caller and model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallTotals {
    /// `summary` or `chat`.
    pub purpose: String,
    /// The summarizer's name, or `chat`.
    pub caller: String,
    /// The model.
    pub model: String,
    /// Calls.
    pub calls: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Prompt tokens the server reported.
    pub prompt_tokens: u64,
    /// Completion tokens the server reported.
    pub completion_tokens: u64,
    /// Milliseconds spent.
    pub millis: u64,
}

/// The stored results of one tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
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

impl From<&StoreMetrics> for Metrics {
    fn from(row: &StoreMetrics) -> Metrics {
        Metrics {
            sessions: row.sessions,
            messages: row.messages,
            compacted_messages: row.compacted_messages,
            memories: row.memories,
            nodes: row
                .nodes
                .iter()
                .map(|n| NodeTotals {
                    summarizer: n.summarizer.clone(),
                    level: n.level,
                    nodes: n.nodes,
                    source_tokens: n.source_tokens,
                    tokens: n.tokens,
                })
                .collect(),
            rejections: row.rejections.clone(),
            calls: row
                .calls
                .iter()
                .map(|c| CallTotals {
                    purpose: c.purpose.clone(),
                    caller: c.caller.clone(),
                    model: c.model.clone(),
                    calls: c.calls,
                    failures: c.failures,
                    prompt_tokens: c.prompt_tokens,
                    completion_tokens: c.completion_tokens,
                    millis: c.millis,
                })
                .collect(),
            tools: row
                .tools
                .iter()
                .map(|t| ToolTotals { tool: t.tool.clone(), calls: t.calls, hits: t.hits, errors: t.errors })
                .collect(),
            embedding_backlog: row.embedding_backlog,
            forgets: row.forgets,
            file_bytes: row.file_bytes,
            wal_bytes: row.wal_bytes,
        }
    }
}

/// What `doctor` found (`Engine.doctor`, `strata doctor --json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DoctorReport {
    /// Whether every check passed.
    pub healthy: bool,
    /// Every check, in the order run.
    pub checks: Vec<Check>,
    /// Rows still waiting for a vector (not a problem: the embedder catches up).
    pub embedding_backlog: u64,
}

/// One check of a [`DoctorReport`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// What was checked, in words.
    pub name: String,
    /// How many problems were found.
    pub problems: u64,
    /// The first problems, in words.
    pub details: Vec<String>,
    /// Why the check could not run this time, when it could not; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl From<&Report> for DoctorReport {
    fn from(row: &Report) -> DoctorReport {
        DoctorReport {
            healthy: row.healthy(),
            checks: row
                .checks
                .iter()
                .map(|check| Check {
                    name: check.name.to_owned(),
                    problems: check.problems,
                    details: check.details.clone(),
                    skipped: check.skipped.clone(),
                })
                .collect(),
            embedding_backlog: row.embedding_backlog,
        }
    }
}

/// What a forget asks for: `{"scope": "persona", "persona": ...}`, `{"scope": "session",
/// "key": ...}` or `{"scope": "session_before", "key": ..., "before": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ForgetScope {
    /// Every session of a persona, and its memories and proposals.
    Persona {
        /// The persona.
        persona: String,
    },
    /// One session, whole.
    Session {
        /// The session's key.
        key: String,
    },
    /// The messages of one session sent before `before`.
    SessionBefore {
        /// The session's key.
        key: String,
        /// The first time kept.
        before: DateTime<Utc>,
    },
}

impl From<&forget::ForgetScope> for ForgetScope {
    fn from(row: &forget::ForgetScope) -> ForgetScope {
        match row {
            forget::ForgetScope::Persona { persona } => ForgetScope::Persona { persona: persona.clone() },
            forget::ForgetScope::Session { key } => ForgetScope::Session { key: key.clone() },
            forget::ForgetScope::SessionBefore { key, before } => {
                ForgetScope::SessionBefore { key: key.clone(), before: *before }
            }
        }
    }
}

/// Counts of what a forget erases, or erased (`DELETE` routes answer with these).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ForgetCounts {
    /// Sessions deleted (a forget of messages before a time keeps its session).
    pub sessions: u64,
    /// Messages deleted.
    pub messages: u64,
    /// Summary nodes deleted.
    pub summaries: u64,
    /// Level-0 summaries rewritten over the messages they keep.
    pub rebuilt: u64,
    /// Memories deleted.
    pub memories: u64,
    /// Earlier versions of memories deleted.
    pub memory_versions: u64,
    /// Queued facts and open proposals deleted.
    pub proposals: u64,
    /// Vectors deleted.
    pub vectors: u64,
    /// Import records deleted.
    pub ingests: u64,
}

impl From<&forget::ForgetCounts> for ForgetCounts {
    fn from(row: &forget::ForgetCounts) -> ForgetCounts {
        ForgetCounts {
            sessions: row.sessions,
            messages: row.messages,
            summaries: row.summaries,
            rebuilt: row.rebuilt,
            memories: row.memories,
            memory_versions: row.memory_versions,
            proposals: row.proposals,
            vectors: row.vectors,
            ingests: row.ingests,
        }
    }
}

/// A level-0 summary that covers forgotten and kept messages: it is rewritten over the kept
/// ones, `first_seq..=last_seq`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeptSpan {
    /// The summary node.
    pub node: NodeId,
    /// Its session.
    pub session: SessionId,
    /// The session's persona.
    pub persona: String,
    /// The seq of the first kept message.
    pub first_seq: i64,
    /// The seq of the last message it covers.
    pub last_seq: i64,
}

/// What a forget would erase (`dry_run`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForgetPlan {
    /// The request.
    pub scope: ForgetScope,
    /// What would go.
    pub counts: ForgetCounts,
    /// The level-0 summaries that would be rewritten over what they keep.
    pub rebuild: Vec<KeptSpan>,
}

impl From<&forget::ForgetPlan> for ForgetPlan {
    fn from(row: &forget::ForgetPlan) -> ForgetPlan {
        ForgetPlan {
            scope: ForgetScope::from(&row.scope),
            counts: ForgetCounts::from(&row.counts),
            rebuild: row
                .rebuild
                .iter()
                .map(|span| KeptSpan {
                    node: span.node,
                    session: span.session,
                    persona: span.persona.clone(),
                    first_seq: span.first_seq,
                    last_seq: span.last_seq,
                })
                .collect(),
        }
    }
}

/// What a forget did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Forgotten {
    /// The id of its audit record.
    pub audit: i64,
    /// What was erased.
    pub counts: ForgetCounts,
    /// Of the rewritten summaries, those that got a marker instead of a new summary.
    pub markers: u64,
    /// Whether the write-ahead log was truncated (another reader may have held it).
    pub wal_truncated: bool,
}

impl From<&forget::Forgotten> for Forgotten {
    fn from(row: &forget::Forgotten) -> Forgotten {
        Forgotten {
            audit: row.audit,
            counts: ForgetCounts::from(&row.counts),
            markers: row.markers,
            wal_truncated: row.wal_truncated,
        }
    }
}

/// Converts every row of `rows` into its shape.
pub fn all<'a, Row: 'a, Shape: From<&'a Row>>(rows: impl IntoIterator<Item = &'a Row>) -> Vec<Shape> {
    rows.into_iter().map(Shape::from).collect()
}

#[cfg(test)]
mod tests {
    //! Version 1's JSON, pinned: a change that breaks one of these changes [`WIRE_VERSION`] in
    //! the same commit.

    use chrono::{TimeZone, Utc};
    use serde_json::{Value, json};
    use strata_seam::forgetting as forget;
    use strata_seam::memories::{Edit, MemoryUpdate, Provenance, QueuedUpdate, UpdateId};
    use strata_seam::{Category, MemoryId, MessageId, NodeId, Role, SessionId};

    use super::WIRE_VERSION;

    fn json_of(value: impl serde::Serialize) -> Value {
        serde_json::to_value(value).unwrap()
    }

    #[test]
    fn version_1_is_the_shapes_below() {
        assert_eq!(WIRE_VERSION, 1);
    }

    #[test]
    fn a_session_leaves_its_reserved_column_out() {
        let at = Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap();
        let row = strata_seam::Session {
            id: SessionId(3),
            key: "chat-1".into(),
            persona: "coder".into(),
            created_at: at,
            last_active_at: at,
            last_bootstrap_at: None,
        };
        assert_eq!(
            json_of(super::Session::from(&row)),
            json!({"id": 3, "key": "chat-1", "persona": "coder", "created_at": "2026-11-02T09:00:00Z",
                   "last_active_at": "2026-11-02T09:00:00Z"})
        );
    }

    #[test]
    fn a_message_answers_its_body_as_the_json_it_was_sent_as() {
        let row = strata_seam::Message {
            id: MessageId(7),
            session_id: SessionId(3),
            seq: 4,
            role: Role::Assistant,
            content: "Done.".into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
            created_at: Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap(),
            token_count: 2,
            pinned: false,
            summary_id: Some(NodeId(11)),
            body: Some(r#"{"role":"assistant","content":"Done.","reasoning_content":"Asked twice."}"#.into()),
        };
        assert_eq!(
            json_of(super::Message::from(&row)),
            json!({"id": 7, "session_id": 3, "seq": 4, "role": "assistant", "content": "Done.",
                   "tool_calls": null, "tool_call_id": null, "name": null,
                   "created_at": "2026-11-02T09:00:00Z", "token_count": 2, "pinned": false,
                   "summary_id": 11,
                   "as_sent": {"role": "assistant", "content": "Done.", "reasoning_content": "Asked twice."}})
        );
        let plain = strata_seam::Message { body: None, ..row };
        assert!(json_of(super::Message::from(&plain)).get("as_sent").is_none());
    }

    #[test]
    fn a_memory_and_a_proposal_keep_their_names() {
        let at = Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap();
        let memory = strata_seam::Memory {
            id: MemoryId(5),
            category: Category::UserPreferences,
            key: "language".into(),
            title: "Language".into(),
            content: "British English.".into(),
            updated_at: at,
            persona: "coder".into(),
            provenance: Some(Provenance::user("python")),
            valid_from: at,
            valid_to: None,
        };
        assert_eq!(
            json_of(super::Memory::from(&memory)),
            json!({"id": 5, "category": "user_preferences", "key": "language", "title": "Language",
                   "content": "British English.", "updated_at": "2026-11-02T09:00:00Z", "persona": "coder",
                   "provenance": {"source": "user", "via": "python"}, "valid_from": "2026-11-02T09:00:00Z"})
        );
        let queued = QueuedUpdate {
            id: UpdateId(2),
            persona: "coder".into(),
            node_id: None,
            update: MemoryUpdate {
                category: Category::UserPreferences,
                key: "language".into(),
                title: "Language".into(),
                content: "British English.".into(),
                edit: Some(Edit::Add),
            },
            proposed: true,
            created_at: at,
        };
        assert_eq!(
            json_of(super::Proposal::from(&queued)),
            json!({"id": 2, "persona": "coder", "node_id": null, "category": "user_preferences",
                   "key": "language", "title": "Language", "content": "British English.", "edit": "add",
                   "proposed": true, "created_at": "2026-11-02T09:00:00Z"})
        );
    }

    #[test]
    fn a_forget_plan_names_its_scope_and_counts() {
        let plan = forget::ForgetPlan {
            scope: forget::ForgetScope::SessionBefore {
                key: "chat-1".into(),
                before: Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).unwrap(),
            },
            counts: forget::ForgetCounts { messages: 4, rebuilt: 1, ..Default::default() },
            rebuild: vec![forget::KeptSpan {
                node: NodeId(11),
                session: SessionId(3),
                persona: "coder".into(),
                first_seq: 4,
                last_seq: 9,
            }],
        };
        assert_eq!(
            json_of(super::ForgetPlan::from(&plan)),
            json!({"scope": {"scope": "session_before", "key": "chat-1", "before": "2026-11-02T09:00:00Z"},
                   "counts": {"sessions": 0, "messages": 4, "summaries": 0, "rebuilt": 1, "memories": 0,
                              "memory_versions": 0, "proposals": 0, "vectors": 0, "ingests": 0},
                   "rebuild": [{"node": 11, "session": 3, "persona": "coder", "first_seq": 4, "last_seq": 9}]})
        );
    }
}
