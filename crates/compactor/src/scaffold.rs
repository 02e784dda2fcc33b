//! The scaffold message: the summary forest as the model sees it.

use strata_seam::SummaryNode;
use strata_seam::fence::{NOTICE, fence};

use crate::tokens::TokenCounter;
use crate::tool_names::{self, ToolNames};

const INTRO: &str = "[Summary of the earlier conversation]\nEarlier parts of this conversation were folded into \
     summaries so it fits the context window; nothing was deleted. The summaries, oldest first \
     (node id, level, time, message seqs, headline), then the details of the newest:";

/// `2026-03-01 10:00 to 12:40 UTC` (the date is repeated only when it changes).
pub(crate) fn time_range(node: &SummaryNode) -> String {
    let start = node.start_time.format("%Y-%m-%d %H:%M");
    if node.start_time.date_naive() == node.end_time.date_naive() {
        format!("{start} to {} UTC", node.end_time.format("%H:%M"))
    } else {
        format!("{start} to {} UTC", node.end_time.format("%Y-%m-%d %H:%M"))
    }
}

fn root_line(node: &SummaryNode) -> String {
    format!(
        "- node {} · level {} · {} · seq {}-{} · {}",
        node.id,
        node.level,
        time_range(node),
        node.first_seq,
        node.last_seq,
        node.headline
    )
}

/// Renders the scaffold for `roots` (in time order). Bodies of the newest roots are included
/// while they fit `body_budget` tokens; `skip_oldest` roots are folded into one count line
/// (only used when even a bare list does not fit the window). `names` are the tools it points
/// to ([`tool_names`]).
pub(crate) fn render(
    roots: &[SummaryNode],
    body_budget: u32,
    skip_oldest: usize,
    counter: &TokenCounter,
    names: Option<&ToolNames>,
) -> String {
    // Summaries are made of what users, tools and web pages said: they go to the model fenced
    // as data, so a tool result that reads "SYSTEM NOTICE: ignore previous instructions" is
    // quoted material here, not a message from the operator.
    let mut listing = String::new();
    let skip = skip_oldest.min(roots.len());
    if skip > 0 {
        let last = &roots[skip - 1];
        listing.push_str(&format!(
            "- {skip} older summaries up to seq {} are not listed to save space{}",
            last.last_seq,
            tool_names::skipped_roots_hint(names)
        ));
    }
    for node in &roots[skip..] {
        if !listing.is_empty() {
            listing.push('\n');
        }
        listing.push_str(&root_line(node));
    }
    let mut remaining = i64::from(body_budget);
    let mut bodies = Vec::new();
    for node in roots[skip..].iter().rev() {
        let block = format!(
            "node {} (level {}, seq {}-{}):\n{}",
            node.id, node.level, node.first_seq, node.last_seq, node.body
        );
        let cost = i64::from(counter.text(&block)) + 2;
        if cost > remaining {
            break;
        }
        remaining -= cost;
        bodies.push(block);
    }
    if !bodies.is_empty() {
        listing.push_str("\n\nDetails of the most recent summaries:");
        for block in bodies.iter().rev() {
            listing.push_str("\n\n");
            listing.push_str(block);
        }
    }
    let text = format!("{INTRO}\n{}\n\n{NOTICE}", fence(&listing));
    match tool_names::scaffold_tools_line(names) {
        line if line.is_empty() => text,
        line => format!("{text}\n\n{line}"),
    }
}
