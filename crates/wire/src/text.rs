//! The one rule that turns a message's parts into text: what search, summaries and token
//! counts read. Text is itself, a refusal its words, media a placeholder naming its type and
//! size, a tool result its content; reasoning is the model's scratch work, kept in the stored
//! message but never searched or summarized; calls are their own column.

use crate::turn::{Block, ReasoningKind, Turn};

/// The text of blocks, one block a line.
pub fn text(blocks: &[Block]) -> String {
    let mut lines: Vec<String> = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            Block::Text(text) | Block::Refusal(text) => lines.push(text.clone()),
            Block::Media(media) => lines.push(media.placeholder()),
            Block::Result(result) => lines.push(text(&result.blocks)),
            Block::Other { kind, .. } => lines.push(format!("[{kind}]")),
            Block::Reasoning(_) | Block::Call(_) => {}
        }
    }
    lines.join("\n")
}

/// The reasoning of a turn that may go back to the model with it, for its token count: a
/// reasoning field or block that some provider's rule sends (DeepSeek's `reasoning_content`
/// beside tool calls, Anthropic's thinking and a Responses reasoning item in a tool loop).
/// Counted whenever it may be sent, so a budget never comes up short.
pub fn reasoning_sent(turn: &Turn) -> String {
    let makes_calls = turn.call_ids().next().is_some();
    let texts: Vec<&str> = turn
        .blocks
        .iter()
        .filter_map(|block| match block {
            Block::Reasoning(reasoning) => match reasoning.kind {
                ReasoningKind::ReasoningContent if makes_calls => Some(reasoning.text.as_str()),
                ReasoningKind::Thinking | ReasoningKind::ResponsesItem => Some(reasoning.text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// How many images, audio clips and files a turn carries (each costs tokens a provider
/// counts from its pixels or seconds, which strata estimates).
pub fn media_count(turn: &Turn) -> u32 {
    fn count(blocks: &[Block]) -> u32 {
        blocks
            .iter()
            .map(|block| match block {
                Block::Media(_) => 1,
                Block::Result(result) => count(&result.blocks),
                _ => 0,
            })
            .sum()
    }
    count(&turn.blocks)
}

/// A byte count as people read it (`812 B`, `12.3 kB`, `2.0 MB`): how every placeholder of
/// media states its size.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", bytes as f64 / 1e3),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}
