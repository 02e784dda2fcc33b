//! Row types and the small value types they are made of.

use std::fmt;

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        /// Parses the number, as a command line gives it.
        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;

            fn from_str(text: &str) -> std::result::Result<$name, Self::Err> {
                text.parse().map($name)
            }
        }

        #[cfg(feature = "rusqlite")]
        impl rusqlite::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                self.0.to_sql()
            }
        }

        #[cfg(feature = "rusqlite")]
        impl rusqlite::types::FromSql for $name {
            fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
                i64::column_result(value).map($name)
            }
        }
    };
}

id_type!(
    /// The id of a session (a conversation).
    SessionId
);
id_type!(
    /// The id of a stored message, unique across the database.
    MessageId
);
id_type!(
    /// The id of a summary node, unique across the database.
    NodeId
);
id_type!(
    /// The id of an agent memory.
    MemoryId
);
id_type!(
    /// The id of a queued memory update or preference proposal (`memory_updates`).
    UpdateId
);

/// The level of a summary node: 0 covers messages, L+1 covers level-L nodes. A number in
/// JSON and in SQL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Level(pub u32);

impl Level {
    /// The level of the nodes that cover messages.
    pub const LEAF: Level = Level(0);

    /// The level of the node that merges nodes of this level.
    pub fn up(self) -> Level {
        Level(self.0 + 1)
    }

    /// This level as an index (into a count per level, say).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(feature = "rusqlite")]
impl rusqlite::ToSql for Level {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        self.0.to_sql()
    }
}

#[cfg(feature = "rusqlite")]
impl rusqlite::types::FromSql for Level {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        u32::column_result(value).map(Level)
    }
}

/// Converts a timestamp to the REAL seconds stored in SQLite.
pub fn to_unix(time: DateTime<Utc>) -> f64 {
    time.timestamp() as f64 + f64::from(time.timestamp_subsec_nanos()) / 1e9
}

/// Converts stored REAL seconds back to a timestamp (millisecond precision).
pub fn from_unix(seconds: f64) -> DateTime<Utc> {
    let millis = (seconds * 1000.0).round() as i64;
    Utc.timestamp_millis_opt(millis).single().unwrap_or(DateTime::UNIX_EPOCH)
}

/// Who sent a message, in the OpenAI chat vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The human.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

impl Role {
    /// The name stored in the database and used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Role> {
        match s {
            "system" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" => Ok(Role::Tool),
            other => {
                Err(Error::invalid("role", format!("{other:?} is not one of system, user, assistant, tool")))
            }
        }
    }
}

/// A conversation, bound to one persona for its whole life.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// Database id.
    pub id: SessionId,
    /// The caller's id for the conversation.
    pub key: String,
    /// The persona (role scope) every tool call of this session is confined to.
    pub persona: String,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// Time of the newest message.
    pub last_active_at: DateTime<Utc>,
    /// Reserved column of the schema, never written: bootstrap turns are derived from the
    /// messages' own times (see the compactor), which cannot drift from what happened.
    pub last_bootstrap_at: Option<DateTime<Utc>>,
}

/// One tool call of an assistant message, read once from the OpenAI `tool_calls` array it is
/// stored as (`{"id", "type": "function", "function": {"name", "arguments"}}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The id the model gave the call (empty when it gave none).
    pub id: String,
    /// The tool's name (empty when the call names none).
    pub name: String,
    /// The arguments: JSON text is parsed; text that is not JSON stays a string (for the tool
    /// to refuse); missing arguments are `null`.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// The calls of a message's `tool_calls`, in order; anything but an array holds none.
    pub fn parse_all(tool_calls: Option<&serde_json::Value>) -> Vec<ToolCall> {
        use serde_json::Value;
        let Some(Value::Array(calls)) = tool_calls else { return Vec::new() };
        calls
            .iter()
            .map(|call| {
                let text = |pointer: &str| {
                    call.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
                };
                let arguments = match call.pointer("/function/arguments").cloned().unwrap_or(Value::Null) {
                    Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    other => other,
                };
                ToolCall { id: text("/id"), name: text("/function/name"), arguments }
            })
            .collect()
    }
}

/// A message to append. The store assigns its id and seq.
#[derive(Clone, Debug, PartialEq)]
pub struct NewMessage {
    /// Who sent it.
    pub role: Role,
    /// The text, verbatim.
    pub content: String,
    /// Tool calls made by an assistant message: a JSON array in the OpenAI format.
    pub tool_calls: Option<serde_json::Value>,
    /// For a tool result: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// Optional participant or tool name.
    pub name: Option<String>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
    /// Its size in tokens, counted by the caller's tokenizer (the store knows nothing of models).
    pub token_count: u32,
    /// Pinned messages are never compacted.
    pub pinned: bool,
    /// An idempotency key, unique within the session (an ingest line's `"id"`, or a bot's own
    /// message id): appending a message whose key the session already holds stores nothing and
    /// answers the stored message's id, so a retried append is harmless.
    pub external_id: Option<String>,
    /// The message object as the caller sent it (JSON text, every field), when the columns
    /// above do not say all of it: reasoning, media, Anthropic blocks, a Responses item.
    pub body: Option<String>,
}

impl NewMessage {
    /// Checks what every append checks (tool calls only on assistant messages, one-line speaker
    /// names and call ids, string call ids), so a reader of a file can name the line at fault.
    pub fn validate(&self) -> crate::Result<()> {
        crate::messages::validate(self)
    }

    /// A plain text message sent now, with its token count still to be filled in.
    pub fn text(role: Role, content: impl Into<String>) -> NewMessage {
        NewMessage {
            role,
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
            created_at: Utc::now(),
            token_count: 0,
            pinned: false,
            external_id: None,
            body: None,
        }
    }
}

/// A stored message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Database id.
    pub id: MessageId,
    /// The session it belongs to.
    pub session_id: SessionId,
    /// 0-based position in its session.
    pub seq: i64,
    /// Who sent it.
    pub role: Role,
    /// The text, verbatim.
    pub content: String,
    /// Tool calls (JSON array), for assistant messages that made some.
    pub tool_calls: Option<serde_json::Value>,
    /// For a tool result: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// Optional participant or tool name.
    pub name: Option<String>,
    /// When it was sent.
    pub created_at: DateTime<Utc>,
    /// Cached token count.
    pub token_count: u32,
    /// Never compacted.
    pub pinned: bool,
    /// The Level-0 node that covers it; `None` while it is uncompacted.
    pub summary_id: Option<NodeId>,
    /// The message object as the caller sent it (JSON text), when the columns do not say all
    /// of it ([`NewMessage::body`]).
    pub body: Option<String>,
}

/// The text of a new summary node, written by a summarizer.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSummary {
    /// One sentence (level of detail 1).
    pub headline: String,
    /// Structured body: timeline, decisions, pitfalls, files (level of detail 2).
    pub body: String,
    /// Tokens of headline + body, counted by the caller.
    pub token_count: u32,
    /// Model id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// Facts the summarizer found worth keeping: queued in the transaction that writes the node
    /// (see [`crate::Memories::pending_updates`]).
    pub memory_updates: Vec<MemoryUpdate>,
}

/// A fact worth keeping, as a summarizer found it: a memory to upsert as the agent, or (for
/// `user_preferences`) a preference to propose to the user. Nothing is checked here; whoever
/// settles the queue applies the rules of `save_memory`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryUpdate {
    /// `progress` or `memo`; `user_preferences` for a preference the user stated.
    pub category: Category,
    /// A short snake_case key.
    pub key: String,
    /// Human-readable label.
    pub title: String,
    /// The fact itself.
    pub content: String,
    /// What it asks of the memory of its key (schema 14): `None` when the summarizer did not
    /// say, checked as an update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<Edit>,
}

/// What a consolidation asks of the memory of a fact's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Edit {
    /// A new memory.
    Add,
    /// The memory's whole new content, keeping what still holds.
    Update,
    /// The memory's content stopped being true; this is what is true now.
    Supersede,
}

impl Edit {
    /// `add`, `update` or `supersede`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Edit::Add => "add",
            Edit::Update => "update",
            Edit::Supersede => "supersede",
        }
    }

    /// The edit named `text`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Edit> {
        [Edit::Add, Edit::Update, Edit::Supersede].into_iter().find(|edit| edit.as_str() == text)
    }
}

/// A row of the `memory_updates` queue: a fact waiting to be settled, or a proposed preference
/// waiting for the user.
#[derive(Clone, Debug, PartialEq)]
pub struct QueuedUpdate {
    /// Database id.
    pub id: UpdateId,
    /// The persona it belongs to.
    pub persona: String,
    /// The node whose summary found it; `None` once that node is gone.
    pub node_id: Option<NodeId>,
    /// The fact.
    pub update: MemoryUpdate,
    /// True for a proposal waiting for the user, false for a fact not yet settled.
    pub proposed: bool,
    /// When the summarizer found it.
    pub created_at: DateTime<Utc>,
}

/// A node of the summary forest.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryNode {
    /// Database id.
    pub id: NodeId,
    /// The session whose messages it covers.
    pub session_id: SessionId,
    /// 0 for nodes over messages, L+1 for nodes over level-L nodes.
    pub level: Level,
    /// The level+1 node it was merged into, if any. Roots have none.
    pub parent_id: Option<NodeId>,
    /// One sentence.
    pub headline: String,
    /// The structured summary.
    pub body: String,
    /// First covered message seq.
    pub first_seq: i64,
    /// Last covered message seq (inclusive).
    pub last_seq: i64,
    /// Time of the first covered message.
    pub start_time: DateTime<Utc>,
    /// Time of the last covered message.
    pub end_time: DateTime<Utc>,
    /// Tokens of headline + body.
    pub token_count: u32,
    /// Tokens of what it summarizes (messages for level 0, children for higher levels).
    pub source_token_count: u32,
    /// Model id, `extractive` or `raw-archive`.
    pub summarizer: String,
    /// When the node was written.
    pub created_at: DateTime<Utc>,
}

/// The three memory categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Task progress: read-write for the agent.
    Progress,
    /// The user's preferences: only the user may write them.
    UserPreferences,
    /// Notes.
    Memo,
}

impl Category {
    /// Every category, in display order.
    pub const ALL: [Category; 3] = [Category::UserPreferences, Category::Progress, Category::Memo];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Progress => "progress",
            Category::UserPreferences => "user_preferences",
            Category::Memo => "memo",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Category {
    type Err = Error;

    fn from_str(s: &str) -> Result<Category> {
        match s {
            "progress" => Ok(Category::Progress),
            "user_preferences" => Ok(Category::UserPreferences),
            "memo" => Ok(Category::Memo),
            other => Err(Error::invalid(
                "category",
                format!("{other:?} is not one of progress, user_preferences, memo"),
            )),
        }
    }
}

/// Who is writing a memory: the rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// The human, through the CLI or the embedding application: may write every category.
    User,
    /// The model, through a tool: may not write `user_preferences`.
    Agent,
}

/// A row of `agent_memories`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Memory {
    /// Database id.
    pub id: MemoryId,
    /// Its category.
    pub category: Category,
    /// snake_case key, unique per category and persona.
    pub key: String,
    /// Human-readable label.
    pub title: String,
    /// Markdown or JSON, at most 500 characters.
    pub content: String,
    /// Last write.
    pub updated_at: DateTime<Utc>,
    /// The persona it belongs to.
    pub persona: String,
    /// Where its current text came from (schema 12); `None` only on a row read without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::provenance::Provenance>,
    /// Since when this text is true (schema 14): the time a supersede gave, else when it was
    /// written.
    pub valid_from: DateTime<Utc>,
    /// When this text stopped being true; `None` while it still is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<DateTime<Utc>>,
}

impl Memory {
    /// Whether this text had stopped being true by `at`: what reads of the present leave out.
    pub fn ended_by(&self, at: DateTime<Utc>) -> bool {
        self.valid_to.is_some_and(|to| to <= at)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ToolCall;

    #[test]
    fn tool_calls_are_read_once_whatever_shape_the_arguments_have() {
        let calls = json!([
            {"id": "c1", "type": "function", "function": {"name": "memory_grep", "arguments": "{\"query\": \"port\"}"}},
            {"id": "c2", "function": {"name": "view_message", "arguments": {"message_id": 7}}},
            {"function": {"name": "memory_search", "arguments": "not json"}},
            {"id": "c4"}
        ]);
        let parsed = ToolCall::parse_all(Some(&calls));
        assert_eq!(parsed.len(), 4);
        assert_eq!((parsed[0].id.as_str(), parsed[0].name.as_str()), ("c1", "memory_grep"));
        assert_eq!(parsed[0].arguments, json!({"query": "port"}));
        assert_eq!(parsed[1].arguments, json!({"message_id": 7}));
        assert_eq!(parsed[2].arguments, json!("not json"));
        assert_eq!((parsed[3].name.as_str(), &parsed[3].arguments), ("", &serde_json::Value::Null));
        assert!(ToolCall::parse_all(Some(&json!({"not": "an array"}))).is_empty());
        assert!(ToolCall::parse_all(None).is_empty());
    }
}
