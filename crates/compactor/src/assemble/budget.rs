//! The budget: what is left out so that the context fits `context_window_tokens -
//! reserve_tokens` less the tools. Over budget the oldest buffer turns go first (they are
//! stored whole and searchable), keeping turns that hold a pinned message; then the scaffold
//! loses its bodies, then its oldest roots. It also measures the unabridged context, which
//! the compaction cycle compares with its trigger.
//!
//! A stage of its own because it only counts: it never changes what a message says, so the
//! prefix it keeps is the same bytes the window laid out.

use strata_seam::{Message, Role, SummaryNode};

use super::context::Part;
use super::slot::{Slot, sum, total};
use super::snapshot::ContextSnapshot;
use crate::config::CompactorConfig;
use crate::plan::Plan;
use crate::scaffold;
use crate::tokens::{TOKENS_PER_REPLY, TokenCounter};
use crate::tool_names::{self, ToolNames};

/// What one elision note costs at most, counted before its text is written.
pub(super) const ELISION_NOTE_TOKENS: u32 = 90;

/// The scaffold and its acknowledgement, showing bodies within `body_budget` tokens and
/// leaving out the `skip` oldest roots. It depends on the forest alone, never on the buffer,
/// so it is byte-identical until the next compaction.
pub(super) fn scaffold_slots(
    snapshot: &ContextSnapshot,
    body_budget: u32,
    skip: usize,
    counter: &TokenCounter,
    names: Option<&ToolNames>,
) -> Vec<Slot> {
    if snapshot.roots.is_empty() {
        return Vec::new();
    }
    let text = scaffold::render(&snapshot.roots, body_budget, skip, counter, names);
    vec![
        Slot::text(Role::User, text, Part::Scaffold, counter),
        Slot::text(Role::Assistant, tool_names::acknowledgement(names), Part::Acknowledgement, counter),
    ]
}

/// Tokens of the whole context with this scaffold and these buffer messages left out, each
/// run of them replaced by one elision note.
pub(super) fn layout_tokens(
    head: &[Slot],
    scaffold: &[Slot],
    buffer: &[(Slot, &Message)],
    elided: &[bool],
    tail: &[Slot],
) -> u32 {
    // `total` counts the reply priming once, with the head.
    let mut tokens = total(head) + sum(scaffold) + sum(tail);
    let mut in_gap = false;
    for ((slot, _), &left_out) in buffer.iter().zip(elided) {
        if left_out {
            if !in_gap {
                tokens += ELISION_NOTE_TOKENS;
            }
            in_gap = true;
        } else {
            tokens += slot.entry.tokens;
            in_gap = false;
        }
    }
    tokens
}

/// The scaffold and which buffer messages are left out so that the context fits: over
/// budget, the oldest buffer turns go first (they are stored whole and searchable), keeping
/// turns that hold a pinned message; then the scaffold loses its bodies, then its oldest roots.
pub(super) fn fit_buffer_and_scaffold(
    snapshot: &ContextSnapshot,
    head: &[Slot],
    buffer: &[(Slot, &Message)],
    tail: &[Slot],
    config: &CompactorConfig,
    counter: &TokenCounter,
) -> (Vec<Slot>, Vec<bool>) {
    let budget = config.budget();
    let names = config.tool_names.as_ref();
    let mut scaffold = scaffold_slots(snapshot, config.scaffold_body_tokens, 0, counter, names);
    let mut elided = vec![false; buffer.len()];
    let fits =
        |scaffold: &[Slot], elided: &[bool]| layout_tokens(head, scaffold, buffer, elided, tail) <= budget;
    for turn in crate::plan::turns(0..buffer.len(), |i| buffer[i].1.role == Role::User) {
        if fits(&scaffold, &elided) {
            break;
        }
        if buffer[turn.clone()].iter().any(|(_, message)| message.pinned) {
            continue;
        }
        elided[turn].fill(true);
    }
    if !fits(&scaffold, &elided) && !snapshot.roots.is_empty() {
        scaffold = scaffold_slots(snapshot, 0, 0, counter, names);
        let mut skip = 0;
        while !fits(&scaffold, &elided) && skip < snapshot.roots.len() {
            skip = (skip + 1 + snapshot.roots.len() / 8).min(snapshot.roots.len());
            scaffold = scaffold_slots(snapshot, 0, skip, counter, names);
        }
    }
    (scaffold, elided)
}

/// acknowledgement and every uncovered message, from the cached counts.
pub(crate) fn unabridged_tokens(
    outline: &[strata_seam::MessageOutline],
    roots: &[SummaryNode],
    config: &CompactorConfig,
    counter: &TokenCounter,
) -> u64 {
    let head_end = Plan::new(outline, config).head_end;
    let messages: u64 = outline
        .iter()
        .enumerate()
        .filter(|(i, m)| *i < head_end || m.summary_id.is_none())
        .map(|(_, m)| u64::from(m.token_count))
        .sum();
    let scaffold = if roots.is_empty() {
        0
    } else {
        let names = config.tool_names.as_ref();
        let text = scaffold::render(roots, config.scaffold_body_tokens, 0, counter, names);
        let acknowledgement = tool_names::acknowledgement(names);
        u64::from(
            counter.message(&text, None, None, None) + counter.message(&acknowledgement, None, None, None),
        )
    };
    messages + scaffold + u64::from(TOKENS_PER_REPLY)
}
