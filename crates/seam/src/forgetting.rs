//! What a forget erases and keeps, decided once for every backend: the scope, the counts,
//! the spans of a session that keep a node, and the marker a rebuilt node gets.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::types::{NewSummary, NodeId, SessionId};

/// What to forget.
#[derive(Clone, Debug, PartialEq)]
pub enum ForgetScope {
    /// Every session of a persona, and its memories and proposals.
    Persona {
        /// The persona.
        persona: String,
    },
    /// One session, whole.
    Session {
        /// The session's key.
        key: String,
    },
    /// The oldest messages of one session: those before the first message sent at or after
    /// `before` (a prefix of the session, so the seqs kept stay dense).
    SessionBefore {
        /// The session's key.
        key: String,
        /// The first time kept.
        before: DateTime<Utc>,
    },
}

impl ForgetScope {
    /// The scope's name as the audit row records it.
    pub fn name(&self) -> &'static str {
        match self {
            ForgetScope::Persona { .. } => "persona",
            ForgetScope::Session { .. } => "session",
            ForgetScope::SessionBefore { .. } => "session_before",
        }
    }
}

/// Counts of what a forget erases (or erased).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForgetCounts {
    /// Sessions deleted (a `--before` forget keeps its session).
    pub sessions: u64,
    /// Messages deleted.
    pub messages: u64,
    /// Summary nodes deleted.
    pub summaries: u64,
    /// Level-0 nodes rewritten from the messages they keep.
    pub rebuilt: u64,
    /// Memories deleted.
    pub memories: u64,
    /// Earlier versions of memories deleted.
    pub memory_versions: u64,
    /// Queued facts and open preference proposals deleted.
    pub proposals: u64,
    /// Vectors deleted (one per embedded chunk).
    pub vectors: u64,
    /// Import records deleted.
    pub ingests: u64,
}

/// A Level-0 node that covers forgotten and kept messages: it is rewritten over the kept
/// ones, `first_seq..=last_seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptSpan {
    /// The node.
    pub node: NodeId,
    /// Its session.
    pub session: SessionId,
    /// The session's persona.
    pub persona: String,
    /// The first kept message's seq.
    pub first_seq: i64,
    /// The last message's seq (the node's).
    pub last_seq: i64,
}

/// The summary a caller wrote for a [`KeptSpan`] before forgetting.
#[derive(Clone, Debug, PartialEq)]
pub struct Rebuilt {
    /// The span it summarizes (the transaction uses it only if the span is still the same).
    pub span: KeptSpan,
    /// The new summary.
    pub summary: NewSummary,
}

/// What a forget would erase: [`Maintenance::forget_plan`](crate::Maintenance::forget_plan) (a dry run).
#[derive(Clone, Debug, PartialEq)]
pub struct ForgetPlan {
    /// The request.
    pub scope: ForgetScope,
    /// What goes.
    pub counts: ForgetCounts,
    /// The Level-0 nodes to rewrite from what they keep.
    pub rebuild: Vec<KeptSpan>,
}

/// What [`Maintenance::forget`](crate::Maintenance::forget) did.
#[derive(Clone, Debug, PartialEq)]
pub struct Forgotten {
    /// The audit row (`forgets.id`).
    pub audit: i64,
    /// What was erased.
    pub counts: ForgetCounts,
    /// Of the rebuilt nodes, those that got a marker instead of a new summary.
    pub markers: u64,
    /// Whether the WAL was checkpointed and truncated (another reader may have held it).
    pub wal_truncated: bool,
}

/// What one session loses: the nodes over forgotten messages (`first_seq < cut`), the Level-0
/// node also covering kept ones, the doomed messages' ids, and the memories and versions that
/// came from them. Decided by [`SessionPart::decide`] from the rows a backend read, so every
/// backend erases by one rule.
#[derive(Clone, Debug, Default)]
pub struct SessionPart {
    /// Nodes that go.
    pub doomed_nodes: Vec<i64>,
    /// The Level-0 node that also covers kept messages, rewritten over them.
    pub partial: Option<KeptSpan>,
    /// Messages that go.
    pub messages: Vec<i64>,
    /// Memories whose every version came from what goes (or whose persona goes).
    pub memories: Vec<i64>,
    /// Versions of the memories in `rewrites` that came from what goes.
    pub versions: Vec<i64>,
    /// Memories that keep versions from elsewhere: rewritten from those.
    pub rewrites: Vec<i64>,
}

/// A memory version whose source lies in a session (a tool call in it, or a node of it): what
/// a forget of that session looks at.
#[derive(Clone, Debug)]
pub struct SessionVersion {
    /// The version.
    pub version: i64,
    /// Its memory.
    pub memory: i64,
    /// The node it was consolidated from.
    pub node: Option<i64>,
    /// The message of the tool call that wrote it.
    pub message: Option<i64>,
}

impl SessionPart {
    /// Decides what `cut` takes, from what the backend read in the forget's transaction: the
    /// session's nodes that start before the cut as `(id, level, last_seq)`, the ids of its
    /// messages before the cut, the memory versions whose source is the session, and
    /// `versions_of`, every version id of a memory.
    pub fn decide(
        cut: &Cut,
        whole_persona: bool,
        nodes: Vec<(i64, i64, i64)>,
        messages: Vec<i64>,
        versions: &[SessionVersion],
        versions_of: &mut dyn FnMut(i64) -> Result<Vec<i64>>,
    ) -> Result<SessionPart> {
        let mut part = SessionPart { messages, ..SessionPart::default() };
        for (id, level, last_seq) in nodes {
            if level == 0 && last_seq >= cut.cut {
                part.partial = Some(KeptSpan {
                    node: NodeId(id),
                    session: cut.session,
                    persona: cut.persona.clone(),
                    first_seq: cut.cut,
                    last_seq,
                });
            } else {
                part.doomed_nodes.push(id);
            }
        }
        // The memory versions whose source is what goes: a node over forgotten text, a tool
        // call in a forgotten message, anything of a forgotten session.
        let nodes: HashSet<i64> =
            part.doomed_nodes.iter().copied().chain(part.partial.iter().map(|s| s.node.0)).collect();
        let messages: HashSet<i64> = part.messages.iter().copied().collect();
        let tainted: Vec<&SessionVersion> = versions
            .iter()
            .filter(|version| {
                cut.whole
                    || version.node.is_some_and(|node| nodes.contains(&node))
                    || version.message.is_some_and(|message| messages.contains(&message))
            })
            .collect();
        let touched: std::collections::BTreeSet<i64> = tainted.iter().map(|version| version.memory).collect();
        let gone: HashSet<i64> = tainted.iter().map(|version| version.version).collect();
        // A memory goes when every version of it came from what goes (or its persona goes); one
        // that also holds kept text is rewritten from that text alone.
        for memory in touched {
            let every = versions_of(memory)?;
            if whole_persona || every.iter().all(|version| gone.contains(version)) {
                part.memories.push(memory);
            } else {
                part.rewrites.push(memory);
            }
        }
        // The versions of a deleted memory are counted with it.
        let doomed: HashSet<i64> = part.memories.iter().copied().collect();
        part.versions = tainted
            .iter()
            .filter(|version| !doomed.contains(&version.memory))
            .map(|version| version.version)
            .collect();
        Ok(part)
    }
}

/// The marker that replaces a node's summary when the caller wrote none: it says that
/// messages were forgotten, nothing of what they said. Every backend writes this one.
pub fn withdrawn(span: &KeptSpan, forgotten: usize, now: DateTime<Utc>) -> NewSummary {
    let headline = "Summary withdrawn: earlier messages of this span were forgotten.".to_owned();
    let body = format!(
        "- {forgotten} messages were forgotten on {} (strata forget).\n- The messages kept, seq {} to {}, \
         are in the history verbatim; this marker is summarized again when the summarizer runs.",
        now.format("%Y-%m-%d"),
        span.first_seq,
        span.last_seq
    );
    // The store counts no tokens; a generous estimate (a token per two bytes) keeps budgets safe.
    let token_count = ((headline.len() + body.len()) / 2) as u32;
    NewSummary {
        headline,
        body,
        token_count,
        summarizer: crate::forest::RAW_ARCHIVE.to_owned(),
        memory_updates: Vec::new(),
    }
}

/// One row of the audit table: a forget that happened.
#[derive(Clone, Debug, PartialEq)]
pub struct ForgetRecord {
    /// Its id.
    pub id: i64,
    /// Who asked (`strata forget`, `Engine::forget`, ...).
    pub command: String,
    /// `persona`, `session` or `session_before`.
    pub scope: String,
    /// The persona.
    pub persona: Option<String>,
    /// The session's key (not for a persona).
    pub session_key: Option<String>,
    /// `--before`.
    pub before: Option<DateTime<Utc>>,
    /// What was erased.
    pub counts: ForgetCounts,
    /// When it was done.
    pub finished_at: Option<DateTime<Utc>>,
}

/// One session's part of a forget: its messages with `seq < cut` go.
#[derive(Clone, Debug)]
pub struct Cut {
    /// The session.
    pub session: SessionId,
    /// Its persona.
    pub persona: String,
    /// The first seq that stays.
    pub cut: i64,
    /// The whole session goes.
    pub whole: bool,
}
