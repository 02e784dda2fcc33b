//! Rows as the store's types: each type's column list and its reader, in one place.

use postgres::Row;
use strata_seam::backend::{from_unix, to_unix};
use strata_seam::memories::{MemoryUpdate, QueuedUpdate, UpdateId};
use strata_seam::{
    Category, Level, Memory, MemoryId, Message, MessageId, MessageOutline, NewMessage, NodeId, Role, Session,
    SessionId, SummaryNode,
};

pub(crate) const OUTLINE: &str = "id, seq, role, token_count, pinned, summary_id, created_at";

pub(crate) fn outline(row: &Row) -> MessageOutline {
    MessageOutline {
        id: MessageId(row.get(0)),
        seq: row.get(1),
        role: row.get::<_, &str>(2).parse().unwrap_or(Role::User),
        token_count: row.get::<_, i32>(3) as u32,
        pinned: row.get(4),
        summary_id: row.get::<_, Option<i64>>(5).map(NodeId),
        created_at: from_unix(row.get(6)),
    }
}

pub(crate) const SESSION: &str = "id, key, persona, created_at, last_active_at, last_bootstrap_at";

pub(crate) fn session(row: &Row) -> Session {
    Session {
        id: SessionId(row.get(0)),
        key: row.get(1),
        persona: row.get(2),
        created_at: from_unix(row.get(3)),
        last_active_at: from_unix(row.get(4)),
        last_bootstrap_at: row.get::<_, Option<f64>>(5).map(from_unix),
    }
}

pub(crate) const MESSAGE: &str = "id, session_id, seq, role, content, tool_calls, tool_call_id, name, \
                                  created_at, token_count, pinned, summary_id, body";

pub(crate) fn message(row: &Row) -> Message {
    Message {
        id: MessageId(row.get(0)),
        session_id: SessionId(row.get(1)),
        seq: row.get(2),
        // The column's CHECK admits the four roles only.
        role: row.get::<_, &str>(3).parse().unwrap_or(Role::User),
        content: row.get(4),
        tool_calls: row.get(5),
        tool_call_id: row.get(6),
        name: row.get(7),
        created_at: from_unix(row.get(8)),
        token_count: row.get::<_, i32>(9) as u32,
        pinned: row.get(10),
        summary_id: row.get::<_, Option<i64>>(11).map(NodeId),
        body: row.get(12),
    }
}

pub(crate) const NODE: &str = "id, session_id, level, parent_id, headline, body, first_seq, last_seq, \
                               start_time, end_time, token_count, source_token_count, summarizer, created_at";

pub(crate) fn node(row: &Row) -> SummaryNode {
    SummaryNode {
        id: NodeId(row.get(0)),
        session_id: SessionId(row.get(1)),
        level: Level(row.get::<_, i32>(2) as u32),
        parent_id: row.get::<_, Option<i64>>(3).map(NodeId),
        headline: row.get(4),
        body: row.get(5),
        first_seq: row.get(6),
        last_seq: row.get(7),
        start_time: from_unix(row.get(8)),
        end_time: from_unix(row.get(9)),
        token_count: row.get::<_, i32>(10) as u32,
        source_token_count: row.get::<_, i32>(11) as u32,
        summarizer: row.get(12),
        created_at: from_unix(row.get(13)),
    }
}

pub(crate) const MEMORY: &str =
    "id, category, key, title, content, updated_at, persona, provenance, valid_from, valid_to";

pub(crate) fn memory(row: &Row) -> Memory {
    Memory {
        id: MemoryId(row.get(0)),
        category: category(row.get(1)),
        key: row.get(2),
        title: row.get(3),
        content: row.get(4),
        updated_at: from_unix(row.get(5)),
        persona: row.get(6),
        // Written by strata from a `Provenance`; a row it cannot read has no known source.
        provenance: row
            .get::<_, Option<serde_json::Value>>(7)
            .and_then(|json| serde_json::from_value(json).ok()),
        valid_from: from_unix(row.get::<_, Option<f64>>(8).unwrap_or(row.get(5))),
        valid_to: row.get::<_, Option<f64>>(9).map(from_unix),
    }
}

pub(crate) const UPDATE: &str =
    "id, persona, node_id, category, key, title, content, state, created_at, edit";

pub(crate) fn update(row: &Row) -> QueuedUpdate {
    QueuedUpdate {
        id: UpdateId(row.get(0)),
        persona: row.get(1),
        node_id: row.get::<_, Option<i64>>(2).map(NodeId),
        update: MemoryUpdate {
            category: category(row.get(3)),
            key: row.get(4),
            title: row.get(5),
            content: row.get(6),
            edit: row.get::<_, Option<&str>>(9).and_then(strata_seam::memories::Edit::parse),
        },
        proposed: row.get::<_, &str>(7) == "proposed",
        created_at: from_unix(row.get(8)),
    }
}

/// The columns' CHECKs admit the three categories only.
fn category(text: &str) -> Category {
    text.parse().unwrap_or(Category::Memo)
}

/// Messages as columns, one array each, for one `INSERT ... SELECT FROM unnest(...)`: what an
/// append and a copy both write of a message, so that a thousand cost one round trip.
#[derive(Default)]
pub(crate) struct MessageColumns {
    pub seq: Vec<i64>,
    pub role: Vec<&'static str>,
    pub content: Vec<String>,
    pub tool_calls: Vec<Option<serde_json::Value>>,
    pub tool_call_id: Vec<Option<String>>,
    pub name: Vec<Option<String>>,
    pub created_at: Vec<f64>,
    pub token_count: Vec<i32>,
    pub pinned: Vec<bool>,
    pub external_id: Vec<Option<String>>,
    /// The message as sent, when the columns do not say all of it (TEXT: kept byte for byte).
    pub body: Vec<Option<String>>,
    /// The text folded as `memory_grep` matches it (`strata_seam::backend::fold`).
    pub folded: Vec<String>,
}

impl MessageColumns {
    /// Adds `message` at `seq`. An empty array of tool calls (some servers send one) is no
    /// tool call, as in SQLite.
    pub fn push(&mut self, message: NewMessage, seq: i64) {
        let created_at = to_unix(message.created_at);
        self.push_at(message, seq, created_at);
    }

    /// [`MessageColumns::push`] with the time as stored (UNIX seconds, to the digit): a copy
    /// keeps what its source holds, not the millisecond `NewMessage::created_at` carries.
    pub fn push_at(&mut self, message: NewMessage, seq: i64, created_at_seconds: f64) {
        let NewMessage {
            role,
            content,
            tool_calls,
            tool_call_id,
            name,
            created_at: _,
            token_count,
            pinned,
            external_id,
            body,
        } = message;
        self.seq.push(seq);
        self.role.push(role.as_str());
        self.folded.push(strata_seam::backend::fold(&content));
        self.content.push(content);
        self.tool_calls.push(tool_calls.filter(|calls| calls.as_array().is_some_and(|a| !a.is_empty())));
        self.tool_call_id.push(tool_call_id);
        self.name.push(name);
        self.created_at.push(created_at_seconds);
        self.token_count.push(token_count as i32);
        self.pinned.push(pinned);
        self.external_id.push(external_id);
        self.body.push(body);
    }

    pub fn len(&self) -> usize {
        self.seq.len()
    }
}
