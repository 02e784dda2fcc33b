//! Where the cuts go: head, turns, tail and the next chunk to summarize.
//!
//! Planning is a pure function of an outline and the configuration. The outline is the *live*
//! part of a session (`Backend::live_outline`: the head and the uncovered messages), so a
//! covered stretch shows as a gap in the seqs: a turn never spans a gap, and the tail never
//! reaches back over one. A plan is made once per compaction call and then consumed chunk by
//! chunk ([`Plan::next_chunk`], [`Plan::covered`]), so a call costs time in proportion to the
//! uncovered messages, not to the rounds times the history.

use strata_seam::{MessageOutline, Role};

use crate::config::CompactorConfig;

/// Chunks smaller than this are left alone: no summary of them can be meaningfully shorter.
pub(crate) const MIN_LEAF_SOURCE_TOKENS: u64 = 64;

/// A turn (or the remainder of the first turn after the head): `outline[start..end]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unit {
    pub start: usize,
    pub end: usize,
    pub tokens: u64,
    /// Holds a pinned message: it stays verbatim, so the turn is never summarized.
    pub pinned: bool,
    /// Holds a message already covered by a Level-0 node.
    pub covered: bool,
    /// The message before it is not in the outline (covered): the tail stops here.
    pub after_gap: bool,
}

impl Unit {
    fn compactable(&self) -> bool {
        !self.pinned && !self.covered
    }
}

/// The cuts of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// `outline[..head_end]` is the protected head.
    pub head_end: usize,
    /// The units after the head, in order.
    pub units: Vec<Unit>,
    /// `units[tail_unit..]` is the protected tail.
    pub tail_unit: usize,
    /// Units before this one were handed out by [`Plan::next_chunk`] or can never be.
    cursor: usize,
    /// Tokens and turns of the compactable middle, kept up to date by [`Plan::covered`].
    middle: (u64, usize),
}

/// The next Level-0 chunk: seqs `first_seq..=last_seq`, made of `units[units]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub first_seq: i64,
    pub last_seq: i64,
    pub tokens: u64,
    pub units: std::ops::Range<usize>,
}

impl Plan {
    /// Cuts a session: the head is the first `head_messages` messages, shortened to end before
    /// a tool call whose results it would cut off, so no call is separated from its answer;
    /// after it, a cut falls before every user message (a turn edge); the tail is the newest
    /// turns within `tail_turns` and `tail_tokens`, the newest one always.
    ///
    /// The head is shortened rather than extended: protected content must stay bounded, and a
    /// head grown over the results of a first-turn call held a tool's output (of any size)
    /// forever, never folded nor stubbed, so one large result made every context impossible.
    pub fn new(outline: &[MessageOutline], config: &CompactorConfig) -> Plan {
        let len = outline.len();
        let mut head_end = (config.head_messages as usize).min(len);
        while head_end > 0
            && head_end < len
            && outline[head_end].role == Role::Tool
            && !gap_before(outline, head_end)
        {
            head_end -= 1;
        }
        // Once the rest of the first turn is folded, the head ends where the folded part
        // begins: a covered message is never sent verbatim (nor its calls answered again).
        if let Some(covered) = outline[..head_end].iter().position(|m| m.summary_id.is_some()) {
            head_end = covered;
        }
        let make = |start: usize, end: usize| {
            let slice = &outline[start..end];
            Unit {
                start,
                end,
                tokens: slice.iter().map(|m| u64::from(m.token_count)).sum(),
                pinned: slice.iter().any(|m| m.pinned),
                covered: slice.iter().any(|m| m.summary_id.is_some()),
                after_gap: start > 0 && gap_before(outline, start),
            }
        };
        // Planning also starts a turn after an idle gap: a new conversation may open with the
        // assistant (a reminder, a scheduled report).
        let units: Vec<Unit> =
            turns(head_end..len, |index| outline[index].role == Role::User || gap_before(outline, index))
                .map(|turn| make(turn.start, turn.end))
                .collect();
        let (mut tail_units, mut tail_tokens) = (0usize, 0u64);
        for unit in units.iter().rev() {
            if unit.covered {
                break;
            }
            let fits = tail_units < config.tail_turns as usize
                && tail_tokens + unit.tokens <= u64::from(config.tail_tokens);
            if tail_units > 0 && !fits {
                break;
            }
            tail_units += 1;
            tail_tokens += unit.tokens;
            if unit.after_gap {
                break;
            }
        }
        let tail_unit = units.len() - tail_units;
        let middle = units[..tail_unit]
            .iter()
            .filter(|unit| unit.compactable())
            .fold((0, 0), |(tokens, turns), unit| (tokens + unit.tokens, turns + 1));
        Plan { head_end, tail_unit, units, cursor: 0, middle }
    }

    /// Tokens and turns of the compactable middle (what is not yet marked [`Plan::covered`]).
    pub fn middle(&self) -> (u64, usize) {
        self.middle
    }

    /// The oldest whole turns of the compactable middle not handed out yet, up to about
    /// `leaf_chunk_tokens`: turns are added while they fit, and past the limit only while the
    /// chunk is under half of it, so a small turn before a huge one is not summarized alone.
    /// A chunk never crosses a covered stretch: its seqs would hold messages another node
    /// covers, which the store refuses every time.
    pub fn next_chunk(&mut self, outline: &[MessageOutline], config: &CompactorConfig) -> Option<Chunk> {
        let limit = u64::from(config.leaf_chunk_tokens);
        // Whether the unit at `index` continues a run that began before it.
        let continues = |units: &[Unit], index: usize| units[index].compactable() && !units[index].after_gap;
        let mut index = self.cursor;
        while index < self.tail_unit {
            if !self.units[index].compactable() {
                index += 1;
                continue;
            }
            let first = index;
            let mut tokens = 0u64;
            while index < self.tail_unit && (index == first || continues(&self.units, index)) {
                let next = self.units[index].tokens;
                if index > first && tokens + next > limit && tokens >= limit / 2 {
                    break;
                }
                tokens += next;
                index += 1;
            }
            if tokens >= MIN_LEAF_SOURCE_TOKENS {
                self.cursor = index;
                return Some(Chunk {
                    first_seq: outline[self.units[first].start].seq,
                    last_seq: outline[self.units[index - 1].end - 1].seq,
                    tokens,
                    units: first..index,
                });
            }
            // A run too small to shrink: skip past it to the next run.
            while index < self.tail_unit && continues(&self.units, index) {
                index += 1;
            }
        }
        self.cursor = index;
        None
    }

    /// Records that a chunk's turns are now covered by a Level-0 node; returns how many
    /// messages that covered.
    pub fn covered(&mut self, chunk: &Chunk) -> u64 {
        let mut messages = 0;
        for unit in &mut self.units[chunk.units.clone()] {
            if unit.compactable() {
                self.middle.0 -= unit.tokens;
                self.middle.1 -= 1;
                messages += (unit.end - unit.start) as u64;
            }
            unit.covered = true;
        }
        messages
    }

    /// The first seq after the head (the head is `seq < head_end_seq`). The live outline may
    /// skip covered messages right after the head, so this is counted from the head's last
    /// message, not read from the next entry.
    pub fn head_end_seq(&self, outline: &[MessageOutline]) -> i64 {
        match self.head_end.checked_sub(1) {
            Some(last) => outline[last].seq + 1,
            None => 0,
        }
    }

    /// Index in the outline where the tail starts (the outline length when there is none).
    pub fn tail_start(&self, outline_len: usize) -> usize {
        self.units.get(self.tail_unit).map_or(outline_len, |unit| unit.start)
    }
}

/// Whether the message before `outline[index]` is missing from the outline (covered).
fn gap_before(outline: &[MessageOutline], index: usize) -> bool {
    index > 0 && outline[index].seq != outline[index - 1].seq + 1
}

/// The one rule of turns: `range` cut into turns, each starting at the range's start or at an
/// index `starts_turn` accepts (a user message; for planning, also the first message after an
/// idle gap). Empty for an empty range.
pub(crate) fn turns(
    range: std::ops::Range<usize>,
    starts_turn: impl Fn(usize) -> bool,
) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut starts: Vec<usize> = Vec::new();
    if !range.is_empty() {
        starts.push(range.start);
        starts.extend((range.start + 1..range.end).filter(|&index| starts_turn(index)));
    }
    let ends: Vec<usize> = starts.iter().skip(1).copied().chain(std::iter::once(range.end)).collect();
    starts.into_iter().zip(ends).map(|(start, end)| start..end)
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use strata_seam::{MessageId, NodeId};

    use super::*;

    #[test]
    fn turns_start_at_the_range_start_and_where_told() {
        let cut = |range: std::ops::Range<usize>, starts: &[usize]| -> Vec<std::ops::Range<usize>> {
            turns(range, |i| starts.contains(&i)).collect()
        };
        assert_eq!(cut(0..5, &[2, 4]), vec![0..2, 2..4, 4..5]);
        assert_eq!(cut(3..6, &[0, 3, 5]), vec![3..5, 5..6], "the start is a turn start anyway");
        assert_eq!(cut(2..2, &[2]), Vec::<std::ops::Range<usize>>::new());
    }

    fn outline(roles: &str, tokens: u32) -> Vec<MessageOutline> {
        roles
            .chars()
            .enumerate()
            .map(|(i, c)| MessageOutline {
                id: MessageId(i as i64 + 1),
                seq: i as i64,
                role: match c {
                    's' => Role::System,
                    'u' => Role::User,
                    'a' => Role::Assistant,
                    _ => Role::Tool,
                },
                token_count: tokens,
                pinned: false,
                summary_id: None,
                created_at: DateTime::UNIX_EPOCH,
            })
            .collect()
    }

    fn config(head: u32, tail_turns: u32) -> CompactorConfig {
        CompactorConfig {
            head_messages: head,
            tail_turns,
            tail_tokens: 1_000_000,
            ..CompactorConfig::default()
        }
    }

    #[test]
    fn turns_start_at_user_messages_and_head_never_ends_inside_a_tool_group() {
        let messages = outline("suattauaua", 10);
        // Head of 3 would end between the call (seq 2) and its results (3, 4): it ends before
        // the call, which goes with its results into the rest of the first turn.
        let plan = Plan::new(&messages, &config(3, 1));
        assert_eq!(plan.head_end, 2);
        let spans: Vec<(usize, usize)> = plan.units.iter().map(|u| (u.start, u.end)).collect();
        assert_eq!(spans, vec![(2, 6), (6, 8), (8, 10)]);
        assert_eq!(plan.tail_unit, 2);
    }

    #[test]
    fn tail_tokens_cap_older_tail_turns_but_never_the_newest() {
        let messages = outline("uauauaua", 100);
        let capped =
            CompactorConfig { head_messages: 0, tail_turns: 3, tail_tokens: 250, ..Default::default() };
        let plan = Plan::new(&messages, &capped);
        assert_eq!(plan.units.len() - plan.tail_unit, 1, "two turns of 200 tokens do not fit 250");
        let tiny = CompactorConfig { tail_tokens: 1, ..capped };
        assert_eq!(Plan::new(&messages, &tiny).tail_unit, 3);
    }

    #[test]
    fn chunks_take_the_oldest_whole_turns_and_skip_pinned_and_covered_ones() {
        let mut messages = outline("uauauauaua", 100);
        messages[0].summary_id = Some(NodeId(1));
        messages[1].summary_id = Some(NodeId(1));
        messages[5].pinned = true;
        let config = CompactorConfig { leaf_chunk_tokens: 300, ..config(0, 1) };
        let mut plan = Plan::new(&messages, &config);
        assert_eq!(plan.middle(), (400, 2));
        let chunk = plan.next_chunk(&messages, &config).unwrap();
        assert_eq!((chunk.first_seq, chunk.last_seq, chunk.tokens), (2, 3, 200));
        plan.covered(&chunk);
        assert_eq!(plan.middle(), (200, 1));
    }

    /// A turn left uncovered before a covered stretch (it was pinned, say) is folded on its
    /// own: a chunk reaching across the stretch would hold covered seqs, refused every time.
    #[test]
    fn a_chunk_never_crosses_a_covered_stretch() {
        let mut messages = outline("uauauaua", 100);
        // The live outline of a session whose seqs 2-3 are covered.
        messages.drain(2..4);
        let config = CompactorConfig { leaf_chunk_tokens: 10_000, ..config(0, 1) };
        let mut plan = Plan::new(&messages, &config);
        assert_eq!(plan.middle(), (400, 2));
        let first = plan.next_chunk(&messages, &config).unwrap();
        assert_eq!((first.first_seq, first.last_seq, first.tokens), (0, 1, 200));
        let second = plan.next_chunk(&messages, &config).unwrap();
        assert_eq!((second.first_seq, second.last_seq, second.tokens), (4, 5, 200));
        assert_eq!(plan.next_chunk(&messages, &config), None);
    }

    /// The live outline leaves covered stretches out: the plan over it equals the plan over the
    /// whole outline, chunk for chunk.
    #[test]
    fn a_live_outline_plans_like_the_whole_one() {
        let mut whole = outline("suauauauauauauauaua", 100);
        for message in &mut whole[1..5] {
            message.summary_id = Some(NodeId(1));
        }
        whole[8].pinned = true;
        let live: Vec<MessageOutline> =
            whole.iter().filter(|m| m.seq < 1 || m.summary_id.is_none()).cloned().collect();
        let config = CompactorConfig { leaf_chunk_tokens: 250, ..config(1, 2) };
        let (mut a, mut b) = (Plan::new(&whole, &config), Plan::new(&live, &config));
        assert_eq!(a.middle(), b.middle());
        loop {
            let (x, y) = (a.next_chunk(&whole, &config), b.next_chunk(&live, &config));
            assert_eq!(
                x.as_ref().map(|c| (c.first_seq, c.last_seq, c.tokens)),
                y.as_ref().map(|c| (c.first_seq, c.last_seq, c.tokens))
            );
            let (Some(x), Some(y)) = (x, y) else { break };
            a.covered(&x);
            b.covered(&y);
        }
        assert_eq!(a.middle(), b.middle());
        // A tail never reaches back over a covered stretch.
        let tail_only = outline("uauaua", 10)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != 2 && *i != 3)
            .map(|(_, m)| m)
            .collect::<Vec<_>>();
        let plan = Plan::new(
            &tail_only,
            &CompactorConfig {
                head_messages: 0,
                tail_turns: 5,
                tail_tokens: 1_000_000,
                ..CompactorConfig::default()
            },
        );
        assert_eq!(plan.tail_unit, 1, "{plan:?}");
    }
}
