//! The one read a context is laid out from: the live part of a session, its roots, the folded
//! turns the refill may show, the persona's memories, and which request is the newest.
//!
//! Everything comes from one snapshot (`Backend::read_snapshot`, a deferred read transaction),
//! so another process's compaction never lands between two of its reads, and it reads only the
//! live session (head, uncovered messages, roots), never the summarized history. It is the
//! first of assembly's one-way steps: the engine reads it, asks recall for the recalled block
//! with [`ContextSnapshot::recall_request`], and hands both to the layout, which reads nothing.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use strata_seam::{
    Backend, Category, Memory, Message, MessageId, MessageOutline, NewMessage, Role, SessionId, SummaryNode,
};

use crate::config::CompactorConfig;
use crate::error::Result;
use crate::masking;
use crate::plan::Plan;

/// Everything one context is laid out from, read in one go ([`Assembler::read`]).
///
/// [`Assembler::read`]: crate::Assembler::read
#[derive(Clone, Debug)]
pub struct ContextSnapshot {
    pub(crate) session: SessionId,
    pub(crate) persona: String,
    pub(crate) plan: Plan,
    pub(crate) outline: Vec<strata_seam::MessageOutline>,
    pub(crate) messages: Vec<Message>,
    pub(crate) roots: Vec<SummaryNode>,
    pub(crate) preferences: Vec<Memory>,
    /// Long-term memories (progress, memo), newest first, expired ones left out.
    pub(crate) memories: Vec<Memory>,
    /// The latest user message (index in `outline`) and whether it opens a bootstrap turn.
    pub(crate) latest_request: Option<(usize, bool)>,
    /// The newest folded messages right before the live part, in seq order, about as many as
    /// the refill may show ([`CompactorConfig::refill_tokens`]).
    pub(crate) folded: Vec<Message>,
    /// The seq given to a request that is not stored (a dry run).
    pub(crate) pending: Option<i64>,
    /// Whether the settings give the recalled block any tokens (`proactive_tokens`).
    pub(crate) block_wanted: bool,
}

/// What the recalled block's search is asked for one context: the newest request, whose
/// persona's history to search, and what to leave out.
#[derive(Clone, Debug)]
pub struct RecallRequest<'a> {
    /// The persona whose whole history is searched.
    pub persona: &'a str,
    /// The newest user request's text.
    pub request: &'a str,
    /// The messages the context may show verbatim (the head and every live message): a hit
    /// among them would say twice what the model already reads.
    pub shown: HashSet<MessageId>,
}

impl ContextSnapshot {
    /// What assembly reads of `session` at `now`; `pending`, a request that is not stored,
    /// joins it as the next message. `also` reads more in the same snapshot.
    pub(crate) fn read<T>(
        store: &dyn Backend,
        session: SessionId,
        config: &CompactorConfig,
        now: DateTime<Utc>,
        pending: Option<NewMessage>,
        also: impl FnOnce(&dyn strata_seam::Snapshot) -> strata_seam::Result<T>,
    ) -> Result<(ContextSnapshot, T)> {
        // One read snapshot: a compaction committed by another process between these reads
        // could otherwise show the same messages verbatim and inside a new node.
        Ok(strata_seam::read_consistent(store, |reader| {
            let persona = reader.session(session)?.persona;
            // Only the live part of the session: the head and what no summary covers.
            let mut outline = reader.live_outline(session, i64::from(config.head_messages))?;
            let pending = match pending {
                Some(new) => Some(unstored(session, reader.next_seq(session)?, new)),
                None => None,
            };
            if let Some(message) = &pending {
                outline.push(MessageOutline {
                    id: message.id,
                    seq: message.seq,
                    role: message.role,
                    token_count: message.token_count,
                    pinned: message.pinned,
                    summary_id: None,
                    created_at: message.created_at,
                });
            }
            let plan = Plan::new(&outline, config);
            let latest_request = latest_request(reader, session, &outline, config)?;
            let head_end_seq = plan.head_end_seq(&outline);
            let mut messages = reader.context_messages(session, head_end_seq)?;
            let pending_seq = pending.as_ref().map(|message| message.seq);
            messages.extend(pending);
            let roots = reader.roots(session, None)?;
            // The folded turns that could be shown again: the newest messages before the first
            // live one after the head, as many as the live part leaves room for.
            // As many as the refill may show: a size fixed by the settings, so the folded turns
            // read (and shown) are the same on every call until the next compaction.
            let room = u64::from(config.refill_tokens());
            let folded = match outline.iter().map(|m| m.seq).find(|&seq| seq >= head_end_seq) {
                _ if !config.refill_folded_turns || roots.is_empty() || room == 0 => Vec::new(),
                Some(live_start) => reader.folded_before(session, head_end_seq..live_start, room)?,
                None => reader.folded_before(session, head_end_seq..reader.next_seq(session)?, room)?,
            };
            // Every category in one read (ordered by category, then key): the preferences, and
            // progress and memos newest first.
            let (preferences, mut memories): (Vec<Memory>, Vec<Memory>) = reader
                .memories(&persona, None)?
                .into_iter()
                .filter(|memory| !config.memory_ttls.is_memory_expired(memory, now) && !memory.ended_by(now))
                .map(|memory| masking::memory(memory, &config.secrets))
                .partition(|memory| memory.category == Category::UserPreferences);
            if config.injected_memory_tokens == 0 {
                memories.clear();
            }
            memories.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.0.cmp(&a.id.0)));
            let also = also(reader)?;
            let snapshot = ContextSnapshot {
                session,
                persona,
                plan,
                outline,
                messages,
                roots,
                preferences,
                memories,
                latest_request,
                folded,
                pending: pending_seq,
                block_wanted: config.proactive_tokens > 0,
            };
            Ok((snapshot, also))
        })?)
    }

    /// The session.
    pub fn session(&self) -> SessionId {
        self.session
    }

    /// The session's persona.
    pub fn persona(&self) -> &str {
        &self.persona
    }

    /// What the recalled block's search is asked, or `None` when there is no block to fill:
    /// no user request, or settings that give the block no tokens.
    pub fn recall_request(&self) -> Option<RecallRequest<'_>> {
        if !self.wants_block() {
            return None;
        }
        Some(RecallRequest {
            persona: &self.persona,
            request: self.request_text()?,
            shown: self.messages.iter().map(|message| message.id).collect(),
        })
    }

    /// Whether the layout shows a recalled block: the settings give it tokens and a request
    /// is there to search for.
    pub(crate) fn wants_block(&self) -> bool {
        self.block_wanted && self.request_text().is_some()
    }

    /// The text of the latest user request, if any.
    fn request_text(&self) -> Option<&str> {
        let (index, _) = self.latest_request?;
        let seq = self.outline[index].seq;
        self.messages.iter().find(|m| m.seq == seq).map(|m| m.content.as_str())
    }
}

/// A request that is not stored, as the message it would be at `seq`. Its id is 0, which no
/// stored message has (SQLite's row ids start at 1); assembly reports it without one.
fn unstored(session: SessionId, seq: i64, new: NewMessage) -> Message {
    Message {
        id: MessageId(0),
        session_id: session,
        seq,
        role: new.role,
        content: new.content,
        tool_calls: new.tool_calls,
        tool_call_id: new.tool_call_id,
        name: new.name,
        created_at: new.created_at,
        token_count: new.token_count,
        pinned: new.pinned,
        summary_id: None,
        body: new.body,
    }
}

/// The latest user message (its index in the live `outline`) and whether it opens a bootstrap
/// turn: it is the session's first request, or it came more than the idle gap after the
/// message before it. The gap is measured to the request itself, not to the time of assembly,
/// so every tool round of one turn gets the same injection (and the same bytes) however long
/// the tools take. What the live outline leaves out (covered messages) is asked for directly.
fn latest_request(
    reader: &dyn strata_seam::Snapshot,
    session: SessionId,
    outline: &[MessageOutline],
    config: &CompactorConfig,
) -> strata_seam::Result<Option<(usize, bool)>> {
    let Some(latest) = outline.iter().rposition(|m| m.role == Role::User) else { return Ok(None) };
    let seq = outline[latest].seq;
    let earlier_request = outline[..latest].iter().any(|m| m.role == Role::User)
        || (seq > 0 && reader.has_request_before(session, seq)?);
    let previous = match latest.checked_sub(1).map(|i| &outline[i]) {
        Some(message) if message.seq == seq - 1 => Some(message.created_at),
        _ if seq > 0 => reader.message_time(session, seq - 1)?,
        _ => None,
    };
    let bootstrap = !earlier_request
        || previous
            .is_none_or(|time| outline[latest].created_at.signed_duration_since(time) > config.idle_gap());
    Ok(Some((latest, bootstrap)))
}
