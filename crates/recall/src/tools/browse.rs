//! `view_message`, `expand_summary` and `view_chat_history_summary`: reading around what a
//! search found. Every lookup goes through the persona-checked store calls, so another
//! persona's ids answer `not_found`, exactly like ids that do not exist.

use chrono::{DateTime, Utc};
use serde::Serialize;
use strata_seam::{Backend, Level, Message, MessageId, NodeId, SessionOverview, SummaryNode};

use super::{ExpandSummaryArgs, ViewMessageArgs};
use crate::config::RecallConfig;
use crate::error::{Error, Result};

/// A message in a list (neighbours, a Level-0 node's sources): its text may be cut.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageExcerpt {
    /// Message id (open it in full with view_message).
    pub id: MessageId,
    /// Position in its session.
    pub seq: i64,
    /// Who sent it.
    pub role: &'static str,
    /// When.
    pub timestamp: DateTime<Utc>,
    /// The text, cut at `excerpt_chars`.
    pub content: String,
    /// Whether `content` was cut.
    pub truncated: bool,
}

impl MessageExcerpt {
    fn new(message: &Message, max_chars: usize) -> MessageExcerpt {
        let content = strata_seam::text::truncate_chars(&message.content, max_chars);
        MessageExcerpt {
            id: message.id,
            seq: message.seq,
            role: message.role.as_str(),
            timestamp: message.created_at,
            truncated: content != message.content,
            content,
        }
    }
}

/// One page of a text: a character range, located in bytes.
struct Page {
    bytes: std::ops::Range<usize>,
    total: u64,
    offset: u64,
    next: Option<u64>,
}

impl Page {
    fn of(text: &str, offset: u64, chars: usize) -> Result<Page> {
        let total = text.chars().count() as u64;
        if offset > total || (offset == total && total > 0) {
            return Err(Error::invalid(
                "offset",
                format!("{offset} is past the end (the text has {total} characters)"),
            ));
        }
        let byte_at =
            |char_index: u64| text.char_indices().nth(char_index as usize).map_or(text.len(), |(at, _)| at);
        let start = byte_at(offset);
        let end_char = (offset + chars as u64).min(total);
        let end = start + text[start..].char_indices().nth(chars).map_or(text.len() - start, |(at, _)| at);
        Ok(Page { bytes: start..end, total, offset, next: (end_char < total).then_some(end_char) })
    }
}

/// A summary node in brief: what it covers and what it says. The children of an expanded node
/// are shown so; a [`NodeView`] adds where the node sits.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeBrief {
    /// Node id (expand it in turn).
    pub id: NodeId,
    /// 0 covers messages; L+1 covers level-L nodes.
    pub level: Level,
    /// First covered message seq.
    pub first_seq: i64,
    /// Last covered message seq (inclusive).
    pub last_seq: i64,
    /// Time of the first covered message.
    pub start_time: DateTime<Utc>,
    /// Time of the last covered message.
    pub end_time: DateTime<Utc>,
    /// One sentence.
    pub headline: String,
    /// The structured summary.
    pub body: String,
}

impl From<SummaryNode> for NodeBrief {
    fn from(node: SummaryNode) -> NodeBrief {
        NodeBrief {
            id: node.id,
            level: node.level,
            first_seq: node.first_seq,
            last_seq: node.last_seq,
            start_time: node.start_time,
            end_time: node.end_time,
            headline: node.headline,
            body: node.body,
        }
    }
}

/// A summary node with where it sits: its [`NodeBrief`], its session, the node it was merged
/// into and who wrote it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeView {
    /// The node in brief.
    #[serde(flatten)]
    pub brief: NodeBrief,
    /// Session key.
    pub session: String,
    /// The node it was merged into, if any.
    pub parent_id: Option<NodeId>,
    /// Who wrote it (model id, `extractive`, `raw-archive`).
    pub summarizer: String,
}

impl NodeView {
    fn new(node: SummaryNode, session: &str) -> NodeView {
        let (parent_id, summarizer) = (node.parent_id, node.summarizer.clone());
        NodeView { brief: NodeBrief::from(node), session: session.to_owned(), parent_id, summarizer }
    }
}

/// The full message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FullMessage {
    /// Message id.
    pub id: MessageId,
    /// Session key.
    pub session: String,
    /// Position in its session.
    pub seq: i64,
    /// Who sent it.
    pub role: &'static str,
    /// When.
    pub timestamp: DateTime<Utc>,
    /// The text, verbatim: the page from `offset`, all of it when it fits one page.
    pub content: String,
    /// Length of the whole text, in characters.
    pub content_chars: u64,
    /// Character offset of this page in the whole text.
    pub offset: u64,
    /// Where the next page starts (pass it as `offset`); `null` on the last page.
    pub next_offset: Option<u64>,
    /// Tool calls an assistant message made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<serde_json::Value>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Pinned messages are never compacted.
    pub pinned: bool,
    /// Cached token count.
    pub token_count: u32,
    /// The message as its sender gave it (reasoning, media, another format's blocks), on the
    /// first page of a message stored with a body; a note of its size where it is too large
    /// for a tool answer (`strata export` gives it whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub as_sent: Option<serde_json::Value>,
}

/// The answer of `view_message`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ViewAnswer {
    /// The message in full.
    pub message: FullMessage,
    /// Up to `view_neighbours` messages before it, oldest first.
    pub before: Vec<MessageExcerpt>,
    /// Up to `view_neighbours` messages after it.
    pub after: Vec<MessageExcerpt>,
    /// The Level-0 summary node that covers it; `null` while it is not compacted.
    pub covering_summary: Option<NodeView>,
}

/// `view_message`: one message of `persona` (a page of its text), its neighbours and its
/// covering summary. Pages are exact character ranges: concatenated, they are the message.
pub fn view(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    args: &ViewMessageArgs,
) -> Result<ViewAnswer> {
    let (message, session) = store.message_of(persona, args.message_id)?;
    let page_chars = match args.max_chars {
        Some(0) => return Err(Error::invalid("max_chars", "must be at least 1")),
        Some(n) => (n as usize).min(config.view_page_chars.saturating_mul(4)),
        None => config.view_page_chars,
    }
    .max(1);
    let page = Page::of(&message.content, args.offset.unwrap_or(0), page_chars)?;
    let around = config.view_neighbours as i64;
    let neighbours =
        store.messages(session.id, (message.seq - around).max(0)..=message.seq.saturating_add(around))?;
    let (before, after): (Vec<&Message>, Vec<&Message>) =
        neighbours.iter().filter(|m| m.seq != message.seq).partition(|m| m.seq < message.seq);
    let covering_summary = match message.summary_id {
        Some(node) => Some(NodeView::new(store.node_of(persona, node)?.0, &session.key)),
        None => None,
    };
    Ok(ViewAnswer {
        before: before.into_iter().map(|m| MessageExcerpt::new(m, config.excerpt_chars)).collect(),
        after: after.into_iter().map(|m| MessageExcerpt::new(m, config.excerpt_chars)).collect(),
        covering_summary,
        message: FullMessage {
            id: message.id,
            session: session.key,
            seq: message.seq,
            role: message.role.as_str(),
            timestamp: message.created_at,
            content: message.content[page.bytes.clone()].to_owned(),
            content_chars: page.total,
            offset: page.offset,
            next_offset: page.next,
            tool_calls: message.tool_calls,
            tool_call_id: message.tool_call_id,
            name: message.name,
            pinned: message.pinned,
            token_count: message.token_count,
            as_sent: message.body.as_deref().filter(|_| page.offset == 0).map(|body| {
                if body.len() <= page_chars.saturating_mul(4) {
                    serde_json::from_str(body).unwrap_or_else(|_| serde_json::Value::String(body.to_owned()))
                } else {
                    serde_json::Value::String(format!(
                        "the message as sent is {} bytes, media included: too large for a tool answer",
                        body.len()
                    ))
                }
            }),
        },
    })
}

/// The answer of `expand_summary`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExpandAnswer {
    /// The node expanded.
    pub node: NodeView,
    /// Its children (higher-level nodes), in time order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<NodeBrief>>,
    /// One page of its source messages (Level-0 nodes), in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<MessageExcerpt>>,
    /// How many source messages the node covers (Level-0 nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_messages: Option<usize>,
    /// The offset of this page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// The offset of the next page, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// `expand_summary`: a node's children, or a page of a Level-0 node's source messages.
pub fn expand(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    args: &ExpandSummaryArgs,
) -> Result<ExpandAnswer> {
    let (node, session) = store.node_of(persona, args.node_id)?;
    let (id, level) = (node.id, node.level);
    let view = NodeView::new(node, &session.key);
    if level > Level::LEAF {
        let children = store.children(id)?.into_iter().map(NodeBrief::from).collect();
        return Ok(ExpandAnswer {
            node: view,
            children: Some(children),
            messages: None,
            total_messages: None,
            offset: None,
            next_offset: None,
        });
    }
    let sources = store.covered_messages(id)?;
    let offset = args.offset.unwrap_or(0) as usize;
    let page_size = config.expand_page_size.max(1);
    let page: Vec<MessageExcerpt> = sources
        .iter()
        .skip(offset)
        .take(page_size)
        .map(|m| MessageExcerpt::new(m, config.excerpt_chars))
        .collect();
    let next = offset.saturating_add(page_size);
    Ok(ExpandAnswer {
        node: view,
        children: None,
        messages: Some(page),
        total_messages: Some(sources.len()),
        offset: Some(offset),
        next_offset: (next < sources.len()).then_some(next),
    })
}

/// One root of a session's forest on the persona's timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// Node id (drill in with expand_summary).
    pub node_id: NodeId,
    /// Session key.
    pub session: String,
    /// Its level.
    pub level: Level,
    /// Time range start.
    pub start_time: DateTime<Utc>,
    /// Time range end.
    pub end_time: DateTime<Utc>,
    /// One sentence.
    pub headline: String,
    /// The structured summary (the newest roots only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// The answer of `view_chat_history_summary`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HistoryAnswer {
    /// The persona's sessions, oldest first, with message counts.
    pub sessions: Vec<SessionOverview>,
    /// The roots of every session's summary forest, in time order (oldest first).
    pub timeline: Vec<TimelineEntry>,
    /// Older roots left out to keep the answer short.
    pub omitted_roots: usize,
    /// Per session with messages no summary covers yet, its newest ones: what happened
    /// recently in other threads, before any summary of it exists.
    pub recent: Vec<RecentMessages>,
}

/// The newest not-yet-summarized messages of one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecentMessages {
    /// Session key.
    pub session: String,
    /// How many messages of it no summary covers.
    pub uncompacted_messages: u64,
    /// The newest of them (at most `history_recent_messages`), oldest first, cut at
    /// `excerpt_chars`.
    pub messages: Vec<MessageExcerpt>,
}

/// `view_chat_history_summary`: the persona's consolidated timeline across its sessions.
pub fn history(store: &dyn Backend, persona: &str, config: &RecallConfig) -> Result<HistoryAnswer> {
    let sessions = store.session_overviews(persona)?;
    let mut roots = Vec::new();
    for session in &sessions {
        for node in store.roots(session.id, None)? {
            roots.push((node, session.key.clone()));
        }
    }
    roots.sort_by(|a, b| a.0.start_time.cmp(&b.0.start_time).then(a.0.id.cmp(&b.0.id)));
    let omitted_roots = roots.len().saturating_sub(config.history_max_roots);
    let kept = roots.split_off(omitted_roots);
    let with_body = kept.len().saturating_sub(config.history_bodies);
    let timeline = kept
        .into_iter()
        .enumerate()
        .map(|(i, (node, session))| TimelineEntry {
            node_id: node.id,
            session,
            level: node.level,
            start_time: node.start_time,
            end_time: node.end_time,
            headline: node.headline,
            body: (i >= with_body).then_some(node.body),
        })
        .collect();
    let mut recent = Vec::new();
    if config.history_recent_messages > 0 {
        for session in sessions.iter().filter(|s| s.uncompacted_messages > 0) {
            let messages = store.recent_uncovered(session.id, config.history_recent_messages)?;
            recent.push(RecentMessages {
                session: session.key.clone(),
                uncompacted_messages: session.uncompacted_messages,
                messages: messages.iter().map(|m| MessageExcerpt::new(m, config.excerpt_chars)).collect(),
            });
        }
        recent.sort_by_key(|r| std::cmp::Reverse(r.messages.last().map(|m| m.timestamp)));
    }
    Ok(HistoryAnswer { sessions, timeline, omitted_roots, recent })
}
