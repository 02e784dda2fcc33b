//! The layout: the stages in their order, then the cut a provider's cache keys on.
//!
//! The window lays the messages out, the budget leaves out what does not fit, the room left
//! goes to the refill and then to the recalled block, and the parts are joined in the order
//! `head · scaffold · acknowledgement | recent · buffer · tail`. The prefix (head, scaffold,
//! acknowledgement) changes only with a compaction; `stable_len` ends before the newest
//! request, the one message carrying what depends on the request, so each call's messages up
//! to it are the previous call's byte for byte.

use std::collections::HashSet;

use serde_json::Value;
use strata_seam::search::Recalled;
use strata_seam::{Memory, Message, MessageId, Role, SessionId, fence};

use super::budget::{fit_buffer_and_scaffold, layout_tokens};
use super::context::{AssembledContext, ContextEntry, Original, Part, TokenAccounting};
use super::preamble::{memories_within, relevant_first};
use super::recalled::Found;
use super::slot::{Slot, answer_every_call, sum, total};
use super::snapshot::ContextSnapshot;
use super::window::{Layer, Parts, slots_of, total_of};
use crate::config::CompactorConfig;
use crate::error::{Error, Result};
use crate::masking;
use crate::tokens::{TOKENS_PER_REPLY, TokenCounter};
use crate::tool_names::{self, ToolNames};

/// The context of `snapshot` with `recalled`, what the search found for
/// [`ContextSnapshot::recall_request`] (ignored when the snapshot asks for no block): a pure
/// function of its inputs, reading and calling nothing.
pub(super) fn lay_out(
    snapshot: &ContextSnapshot,
    recalled: Option<Recalled>,
    config: &CompactorConfig,
    counter: &TokenCounter,
) -> Result<AssembledContext> {
    let session = snapshot.session;
    let budget = config.budget();
    // The search changes the layout (the memories shown), so it ran before it, leaving out
    // what the context may show verbatim (the head and every live message).
    let found = recalled.filter(|_| snapshot.wants_block()).map(|mut found| {
        masking::recalled(&mut found, &config.secrets);
        found
    });
    let by_relevance = relevant_first(snapshot.memories.clone(), found.as_ref());
    let (memories, more_memories) = match snapshot.latest_request {
        Some((_, true)) => memories_within(by_relevance, config.injected_memory_tokens, counter),
        // A regular turn shows no memory list (its template's `{memories}` is empty): the
        // relevant ones come in the recalled block.
        _ => (Vec::new(), 0),
    };
    // The saved memories the search found relevant that the injection does not list already,
    // most relevant first: the block's first lines.
    let relevant_memories: Vec<Memory> = match &found {
        Some(found) => found
            .memories
            .iter()
            .filter(|id| !memories.iter().any(|shown| shown.id == **id))
            .filter_map(|id| snapshot.memories.iter().find(|memory| memory.id == *id).cloned())
            .collect(),
        None => Vec::new(),
    };
    let mut layer = Layer::new(snapshot, &memories, more_memories, config, counter);
    let messages = answer_every_call(&snapshot.messages, counter);
    let Parts { mut head, buffer, mut tail } = layer.split(snapshot, &messages);
    layer.stub_oversized_protected(&mut head, &mut tail, budget);
    let protected = total(&slots_of(&head)) + total_of(&tail);
    if protected > budget {
        return Err(Error::ContextTooLarge { session, needed: protected, budget });
    }
    let (scaffold, elided) =
        fit_buffer_and_scaffold(snapshot, &slots_of(&head), &buffer, &slots_of(&tail), config, counter);
    let base = layout_tokens(&slots_of(&head), &scaffold, &buffer, &elided, &slots_of(&tail));
    // The room the base leaves (none where something had to be left out) goes first to the
    // refilled folded turns, which the forest alone decides ([`CompactorConfig::refill_tokens`]),
    // so they stay byte-identical until the next compaction; then to the recalled block, up to
    // its own budget. Between compactions the live part stays under the trigger, which leaves
    // room for both; only a context that could not be folded loses refilled turns here.
    let room = if elided.contains(&true) { 0 } else { budget.saturating_sub(base) };
    let recent = layer.refill(snapshot, room.min(config.refill_tokens()));
    let cap = config.proactive_tokens.min(room - sum(&recent));
    let block = found.and_then(|found| {
        let refilled: HashSet<MessageId> = recent.iter().filter_map(|slot| slot.entry.message_id).collect();
        let found = Found { recalled: found, memories: relevant_memories };
        layer.lay_block(snapshot, &mut head, &mut tail, found, &refilled, cap)
    });
    let head = slots_of(&head);
    let tail = slots_of(&tail);
    let joined = join(head, scaffold, recent, buffer, &elided, tail, counter, config.tool_names.as_ref());
    let mut tokens = account(&joined.slots, config);
    tokens.recalled = block.as_ref().map_or(0, |block| block.tokens);
    if tokens.total > budget {
        return Err(Error::ContextTooLarge { session, needed: tokens.total, budget });
    }
    let stubbed_messages =
        joined.slots.iter().filter(|s| s.entry.abridged && s.entry.message_id.is_some()).count() as u32;
    let originals: Vec<Option<Original>> = joined.slots.iter().map(|slot| slot.original.clone()).collect();
    let (messages, mut entries): (Vec<Value>, Vec<ContextEntry>) =
        joined.slots.into_iter().map(|slot| (slot.value, slot.entry)).unzip();
    // The request of a dry run is not stored: it has no id.
    for entry in entries.iter_mut().filter(|entry| entry.seq.is_some() && entry.seq == snapshot.pending) {
        entry.message_id = None;
    }
    let stable_len = stable_len(snapshot, &entries);
    let stable_tokens = entries[..stable_len].iter().map(|entry| entry.tokens).sum();
    Ok(AssembledContext {
        session_id: session,
        messages,
        entries,
        tokens,
        prefix_len: joined.prefix_len,
        stable_len,
        stable_tokens,
        prompt_cache_key: prompt_cache_key(session, &snapshot.persona),
        injection: layer.injection,
        elided_messages: joined.elided_messages,
        stubbed_messages,
        recalled: block,
        originals,
    })
}

/// How many leading entries the next call repeats byte for byte: those before the newest
/// request, the last user message the context shows (the refill's copies of folded requests
/// are not it), since only that message carries an injection.
fn stable_len(snapshot: &ContextSnapshot, entries: &[ContextEntry]) -> usize {
    let Some((index, _)) = snapshot.latest_request else { return entries.len() };
    let seq = snapshot.outline[index].seq;
    entries
        .iter()
        .position(|entry| entry.seq == Some(seq) && entry.part != Part::Recent)
        .unwrap_or(entries.len())
}

/// `strata-<session id>-<persona>`, cut to the 64 characters OpenAI takes.
fn prompt_cache_key(session: SessionId, persona: &str) -> String {
    let key = format!("strata-{}-{}", session.0, fence::one_line(persona));
    key.chars().take(64).collect()
}

/// The context's slots in order, and what the joining counted.
struct Joined {
    slots: Vec<Slot>,
    /// Messages of the stable prefix: head, scaffold and acknowledgement.
    prefix_len: usize,
    elided_messages: u32,
}

/// Head, scaffold, the refilled folded turns, the buffer with each run of left-out messages as one elision note, tail.
// The context's parts in their order, each its own argument, then how to count and word them.
#[allow(clippy::too_many_arguments)]
fn join(
    head: Vec<Slot>,
    scaffold: Vec<Slot>,
    recent: Vec<Slot>,
    buffer: Vec<(Slot, &Message)>,
    elided: &[bool],
    tail: Vec<Slot>,
    counter: &TokenCounter,
    names: Option<&ToolNames>,
) -> Joined {
    let mut slots = head;
    let prefix_len = slots.len() + scaffold.len();
    slots.extend(scaffold);
    slots.extend(recent);
    let mut elided_messages = 0u32;
    let mut gap: Vec<&Message> = Vec::new();
    let flush = |gap: &mut Vec<&Message>, slots: &mut Vec<Slot>| {
        if let (Some(first), Some(last)) = (gap.first(), gap.last()) {
            let tokens: u64 = gap.iter().map(|m| u64::from(m.token_count)).sum();
            let note = elision_note(first, last, gap.len(), tokens, names);
            slots.push(Slot::text(Role::User, note, Part::Buffer, counter));
            gap.clear();
        }
    };
    for ((slot, message), &left_out) in buffer.into_iter().zip(elided) {
        if left_out {
            elided_messages += 1;
            gap.push(message);
        } else {
            flush(&mut gap, &mut slots);
            slots.push(slot);
        }
    }
    flush(&mut gap, &mut slots);
    slots.extend(tail);
    Joined { slots, prefix_len, elided_messages }
}

/// The tokens of each part, the request's fixed costs and the total.
fn account(slots: &[Slot], config: &CompactorConfig) -> TokenAccounting {
    let mut tokens = TokenAccounting {
        reply_priming: TOKENS_PER_REPLY,
        tools: config.request_overhead_tokens,
        budget: config.budget(),
        ..TokenAccounting::default()
    };
    for slot in slots {
        let field = match slot.entry.part {
            Part::Head => &mut tokens.head,
            Part::Scaffold => &mut tokens.scaffold,
            Part::Acknowledgement => &mut tokens.acknowledgement,
            Part::Recent => &mut tokens.recent,
            Part::Buffer => &mut tokens.buffer,
            Part::Tail => &mut tokens.tail,
        };
        *field += slot.entry.tokens;
    }
    tokens.total = total(slots);
    tokens
}

fn elision_note(
    first: &Message,
    last: &Message,
    count: usize,
    tokens: u64,
    names: Option<&ToolNames>,
) -> String {
    format!(
        "[{count} earlier messages (seq {}-{}, ids {}-{}, {tokens} tokens) are left out here to fit the context \
         window; they are not summarized yet but stored whole{}.]",
        first.seq,
        last.seq,
        first.id,
        last.id,
        tool_names::find_left_out(names)
    )
}
