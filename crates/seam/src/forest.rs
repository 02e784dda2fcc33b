//! The rules of the summary forest: what a valid summary is, where a merged node goes
//! ([`NodePlace`]), and which roots may merge.

use crate::error::{Error, Result};
use crate::types::{Level, NewSummary, SessionId, SummaryNode, to_unix};

/// The rules every summary obeys, whatever stores it: a headline, a body and a summarizer's name.
pub fn validate(summary: &NewSummary) -> Result<()> {
    if summary.headline.trim().is_empty() {
        return Err(Error::invalid("headline", "a summary needs a headline"));
    }
    if summary.body.trim().is_empty() {
        return Err(Error::invalid("body", "a summary needs a body"));
    }
    if summary.summarizer.trim().is_empty() {
        return Err(Error::invalid("summarizer", "name the summarizer"));
    }
    Ok(())
}

/// The summarizer name of the flagged digests the compactor writes while the summarizer is
/// down. The store owns it because its partial index (`summary_nodes_raw_archive`, in both
/// backends' schemas) is on exactly this value: a statement must spell it literally, not bind
/// it, for the index to serve.
pub const RAW_ARCHIVE: &str = "raw-archive";

/// Where a new node goes, a leaf or a merge's parent ([`plan_merge`]), whatever stores it.
#[derive(Clone, Debug)]
pub struct NodePlace {
    /// The session.
    pub session: SessionId,
    /// The level: 0 for a leaf, one above the children's for a parent.
    pub level: Level,
    /// The first seq covered.
    pub first_seq: i64,
    /// The last seq covered.
    pub last_seq: i64,
    /// The earliest of the sources' times (UNIX seconds).
    pub start_time: f64,
    /// The latest of the sources' times (UNIX seconds).
    pub end_time: f64,
    /// The sources' tokens, together.
    pub source_token_count: i64,
}

/// The rules of a merge's children, whatever stores them: at least two distinct nodes of one
/// session and one level, none merged already ([`Error::AlreadyMerged`]). Returns them in
/// order and the parent's place; that they are adjacent roots is for the caller's query, whose
/// count [`check_adjacent`] judges.
pub fn plan_merge(mut nodes: Vec<SummaryNode>) -> Result<(Vec<SummaryNode>, NodePlace)> {
    if nodes.len() < 2 {
        return Err(Error::invalid("children", "a merge needs at least two nodes"));
    }
    nodes.sort_by_key(|node| node.first_seq);
    if nodes.windows(2).any(|pair| pair[0].id == pair[1].id) {
        return Err(Error::invalid("children", "a node is named twice"));
    }
    let (session, level) = (nodes[0].session_id, nodes[0].level);
    for node in &nodes {
        if node.session_id != session || node.level != level {
            return Err(Error::invalid("children", "nodes of one session and one level only"));
        }
        if let Some(parent) = node.parent_id {
            return Err(Error::AlreadyMerged { node: node.id, parent });
        }
    }
    let plan = NodePlace {
        session,
        level: level.up(),
        first_seq: nodes[0].first_seq,
        last_seq: nodes[nodes.len() - 1].last_seq,
        // Times may go backwards in a transcript (clock changes, imported merges): a node's
        // range is the min and max of its sources', never its first's start and last's end.
        start_time: nodes.iter().map(|node| to_unix(node.start_time)).fold(f64::INFINITY, f64::min),
        end_time: nodes.iter().map(|node| to_unix(node.end_time)).fold(f64::NEG_INFINITY, f64::max),
        source_token_count: nodes.iter().map(|node| i64::from(node.token_count)).sum(),
    };
    Ok((nodes, plan))
}

/// The second rule of a merge's children: no other root of their level lies between them.
/// `roots_between` is how many roots of the level start within the children's first seqs
/// (theirs included).
pub fn check_adjacent(roots_between: i64, children: &[SummaryNode]) -> Result<()> {
    if roots_between != children.len() as i64 {
        return Err(Error::invalid("children", "the nodes are not adjacent roots of their level"));
    }
    Ok(())
}
