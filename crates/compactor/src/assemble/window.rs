//! The history window: which stored messages the context shows and as what. The head and the
//! tail verbatim, the buffer between them, and the refill (the newest folded turns shown again
//! while they fit the room above the trigger, chosen by the forest alone so they stay
//! byte-identical until the next compaction).
//!
//! It exists apart from the budget because it decides what each message is (verbatim, a stub,
//! the request with its preamble), while the budget only decides what is left out. Head and
//! tail become stubs only when a huge message of theirs would make the context impossible.

use strata_seam::{Memory, Message, Role};

use super::context::{Injection, Part};
use super::preamble::{Background, inject, injection_of};
use super::slot::{Slot, answer_every_call, stub};
use super::snapshot::ContextSnapshot;
use crate::config::CompactorConfig;
use crate::tokens::{TOKENS_PER_REPLY, TokenCounter};

/// The slots of laid-out messages, in order.
pub(super) fn slots_of(laid: &[(Slot, &Message)]) -> Vec<Slot> {
    laid.iter().map(|(slot, _)| slot.clone()).collect()
}

/// Lays messages out as slots: the latest request with its injection, an oversized buffer
/// message as a stub, everything else verbatim.
pub(super) struct Layer<'a> {
    pub(super) background: Background<'a>,
    pub(super) config: &'a CompactorConfig,
    pub(super) counter: &'a TokenCounter,
    pub(super) injection: Injection,
    /// The seq of the message the injection goes into, if any.
    pub(super) injected: Option<i64>,
}

/// A context's messages by part, before the budget is applied; buffer and tail slots keep
/// their message.
pub(super) struct Parts<'m> {
    pub(super) head: Vec<(Slot, &'m Message)>,
    pub(super) buffer: Vec<(Slot, &'m Message)>,
    pub(super) tail: Vec<(Slot, &'m Message)>,
}

impl<'a> Layer<'a> {
    pub(super) fn new(
        snapshot: &'a ContextSnapshot,
        memories: &'a [Memory],
        more_memories: usize,
        config: &'a CompactorConfig,
        counter: &'a TokenCounter,
    ) -> Layer<'a> {
        let (injection, injected) = injection_of(snapshot, false);
        let background = Background {
            persona: &snapshot.persona,
            preferences: &snapshot.preferences,
            memories,
            more_memories,
            recalled: String::new(),
        };
        Layer { background, config, counter, injection, injected }
    }

    /// The newest folded turns, whole, that fit `room` tokens, laid out as the buffer's
    /// messages are (an oversized one as a stub).
    pub(super) fn refill(&self, snapshot: &ContextSnapshot, room: u32) -> Vec<Slot> {
        let folded = answer_every_call(&snapshot.folded, self.counter);
        let slots: Vec<Slot> = folded.iter().map(|message| self.lay(message, Part::Recent)).collect();
        // The earliest start of a turn (a user message, or the first message after the head)
        // from which everything to the live part fits.
        let head_end_seq = snapshot.plan.head_end_seq(&snapshot.outline);
        let mut spent = 0;
        let mut start = slots.len();
        for index in (0..slots.len()).rev() {
            spent += slots[index].entry.tokens;
            if spent > room {
                break;
            }
            if folded[index].role == Role::User || folded[index].seq == head_end_seq {
                start = index;
            }
        }
        slots.into_iter().skip(start).collect()
    }

    pub(super) fn lay(&self, message: &Message, part: Part) -> Slot {
        if Some(message.seq) == self.injected {
            let bootstrap = self.injection == Injection::Bootstrap;
            let content = inject(&self.background, self.config, bootstrap, message);
            return Slot::message(message, &content, part, false, self.counter);
        }
        let slot = Slot::message(message, &message.content, part, false, self.counter);
        let folded_away = matches!(part, Part::Buffer | Part::Recent);
        if folded_away && !message.pinned && slot.entry.tokens > self.config.oversized_message_tokens {
            return self.stubbed(message, part, slot.entry.tokens);
        }
        slot
    }

    fn stubbed(&self, message: &Message, part: Part, tokens: u32) -> Slot {
        Slot::message(
            message,
            &stub(message, tokens, self.config.tool_names.as_ref()),
            part,
            true,
            self.counter,
        )
    }

    /// Head, buffer and tail by the plan's boundaries.
    pub(super) fn split<'m>(&self, snapshot: &ContextSnapshot, messages: &'m [Message]) -> Parts<'m> {
        let head_end_seq = snapshot.plan.head_end_seq(&snapshot.outline);
        let tail_start_seq = snapshot
            .outline
            .get(snapshot.plan.tail_start(snapshot.outline.len()))
            .map_or(i64::MAX, |m| m.seq);
        let mut parts = Parts { head: Vec::new(), buffer: Vec::new(), tail: Vec::new() };
        for message in messages {
            if message.seq < head_end_seq {
                parts.head.push((self.lay(message, Part::Head), message));
            } else if message.seq >= tail_start_seq {
                parts.tail.push((self.lay(message, Part::Tail), message));
            } else {
                parts.buffer.push((self.lay(message, Part::Buffer), message));
            }
        }
        parts
    }

    /// Head and tail are verbatim, unless a huge message of either (a tool result larger than
    /// the window, say) would make the context impossible: then the largest oversized ones,
    /// never the request being answered nor a pinned message, become stubs, as they would in
    /// the buffer. Protected content is bounded this way: the head is as much at risk as the
    /// tail (a first turn's tool result in a session with no system message).
    pub(super) fn stub_oversized_protected<'m>(
        &self,
        head: &mut [(Slot, &'m Message)],
        tail: &mut [(Slot, &'m Message)],
        budget: u32,
    ) {
        let stubbable = |(slot, message): &(Slot, &Message)| {
            Some(message.seq) != self.injected
                && !message.pinned
                && slot.entry.tokens > self.config.oversized_message_tokens
        };
        let mut oversized: Vec<(bool, usize)> = (0..head.len())
            .filter(|&i| stubbable(&head[i]))
            .map(|i| (true, i))
            .chain((0..tail.len()).filter(|&i| stubbable(&tail[i])).map(|i| (false, i)))
            .collect();
        let tokens = |head: &[(Slot, &Message)], tail: &[(Slot, &Message)], (in_head, i): (bool, usize)| {
            if in_head { head[i].0.entry.tokens } else { tail[i].0.entry.tokens }
        };
        oversized.sort_by_key(|&at| std::cmp::Reverse(tokens(head, tail, at)));
        let mut protected = total_of(head) + TOKENS_PER_REPLY + total_of(tail);
        for (in_head, i) in oversized {
            if protected <= budget {
                break;
            }
            let (slot, message) = if in_head { &mut head[i] } else { &mut tail[i] };
            let part = if in_head { Part::Head } else { Part::Tail };
            let before = slot.entry.tokens;
            *slot = self.stubbed(message, part, before);
            protected = protected - before + slot.entry.tokens;
        }
    }
}

/// Tokens of slots that keep their message.
pub(super) fn total_of(slots: &[(Slot, &Message)]) -> u32 {
    slots.iter().map(|(slot, _)| slot.entry.tokens).sum()
}
