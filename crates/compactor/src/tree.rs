//! `strata tree`: the summary forest drawn as an indented tree.

use std::collections::HashMap;
use std::fmt::Write as _;

use strata_seam::{Backend, NodeId, SessionId, SummaryNode};

use crate::error::Result;
use crate::scaffold::time_range;

/// Draws a session's forest: every root in time order with its descendants indented below it,
/// each line naming id, level, seq range, time range, tokens, summarizer and headline; then
/// the messages no node covers.
pub fn render_tree(store: &dyn Backend, session: SessionId) -> Result<String> {
    let info = store.session_by_id(session)?;
    let nodes = store.nodes(session)?;
    let outline = store.message_outline(session)?;
    let mut children: HashMap<NodeId, Vec<&SummaryNode>> = HashMap::new();
    let mut roots = Vec::new();
    for node in &nodes {
        match node.parent_id {
            Some(parent) => children.entry(parent).or_default().push(node),
            None => roots.push(node),
        }
    }
    for list in children.values_mut() {
        list.sort_by_key(|node| node.first_seq);
    }
    roots.sort_by_key(|node| node.first_seq);
    let mut per_level: Vec<usize> = Vec::new();
    for node in &nodes {
        let level = node.level.index();
        if per_level.len() <= level {
            per_level.resize(level + 1, 0);
        }
        per_level[level] += 1;
    }
    let levels: Vec<String> =
        per_level.iter().enumerate().map(|(level, n)| format!("L{level}: {n}")).collect();
    let uncovered: Vec<i64> = outline.iter().filter(|m| m.summary_id.is_none()).map(|m| m.seq).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "session {} (persona {}): {} messages, {} uncompacted; {} nodes{}",
        info.key,
        info.persona,
        outline.len(),
        uncovered.len(),
        nodes.len(),
        if levels.is_empty() { String::new() } else { format!(" ({})", levels.join(", ")) }
    );
    fn draw(
        out: &mut String,
        node: &SummaryNode,
        depth: usize,
        children: &HashMap<NodeId, Vec<&SummaryNode>>,
    ) {
        let flag = if node.summarizer == crate::extractive::RAW_ARCHIVE { " [raw archive]" } else { "" };
        let _ = writeln!(
            out,
            "{indent}- #{id} L{level} seq {first}-{last} · {time} · {tokens}/{source} tokens · {summarizer}{flag}\n{indent}  {headline}",
            indent = "  ".repeat(depth),
            id = node.id,
            level = node.level,
            first = node.first_seq,
            last = node.last_seq,
            time = time_range(node),
            tokens = node.token_count,
            source = node.source_token_count,
            summarizer = node.summarizer,
            headline = node.headline,
        );
        for child in children.get(&node.id).into_iter().flatten() {
            draw(out, child, depth + 1, children);
        }
    }
    for root in roots {
        draw(&mut out, root, 0, &children);
    }
    if !uncovered.is_empty() {
        let mut ranges = Vec::new();
        let mut start = uncovered[0];
        let mut previous = start;
        for &seq in &uncovered[1..] {
            if seq != previous + 1 {
                ranges.push((start, previous));
                start = seq;
            }
            previous = seq;
        }
        ranges.push((start, previous));
        let text: Vec<String> =
            ranges.iter().map(|&(a, b)| if a == b { format!("{a}") } else { format!("{a}-{b}") }).collect();
        let _ = writeln!(out, "uncompacted messages: seq {}", text.join(", "));
    }
    Ok(out)
}
