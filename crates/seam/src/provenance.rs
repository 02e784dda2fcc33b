//! Where a memory came from ([`Provenance`], [`Source`]) and its earlier versions
//! ([`MemoryVersion`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::types::{MessageId, NodeId, SessionId};

/// Who or what wrote a version of a memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The human: the command line, the application, Python.
    User,
    /// The model, through a tool call.
    Agent,
    /// A fact a summarizer found in a summary node, settled into memory.
    Summary,
    /// A preference a summary proposed and the user accepted.
    Proposal,
    /// Written before strata recorded sources (schema 12).
    Unknown,
}

impl Source {
    /// The word a backend stores.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Agent => "agent",
            Source::Summary => "summary",
            Source::Proposal => "proposal",
            Source::Unknown => "unknown",
        }
    }

    /// The source a stored word names; an unknown word is [`Source::Unknown`].
    pub fn parse(text: &str) -> Source {
        match text {
            "user" => Source::User,
            "agent" => Source::Agent,
            "summary" => Source::Summary,
            "proposal" => Source::Proposal,
            _ => Source::Unknown,
        }
    }
}

/// Where a version of a memory came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// Who wrote it.
    pub source: Source,
    /// The command or tool it came through (`strata memory set`, `save_memory`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The session of the tool call or of the summary node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// The summary node it was consolidated from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// The first seq of the messages that node covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<i64>,
    /// The last seq of the messages that node covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<i64>,
    /// The message of the agent's tool call (the newest message of its session when the call
    /// came without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<MessageId>,
    /// The tool call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Provenance {
    fn of(source: Source) -> Provenance {
        Provenance {
            source,
            via: None,
            session: None,
            node: None,
            first_seq: None,
            last_seq: None,
            message: None,
            tool_call_id: None,
        }
    }

    /// Written by the user through `via` (a command, `python`, the application).
    pub fn user(via: impl Into<String>) -> Provenance {
        Provenance { via: Some(via.into()), ..Provenance::of(Source::User) }
    }

    /// Saved by the agent through the tool `via` in `session`, by the tool call `tool_call_id`
    /// of `message` when known.
    pub fn agent(
        via: impl Into<String>,
        session: SessionId,
        message: Option<MessageId>,
        tool_call_id: Option<String>,
    ) -> Provenance {
        Provenance {
            via: Some(via.into()),
            session: Some(session),
            message,
            tool_call_id,
            ..Provenance::of(Source::Agent)
        }
    }

    /// Consolidated from the facts of summary `node`; the store adds its session and range.
    pub fn summary(node: NodeId) -> Provenance {
        Provenance { node: Some(node), ..Provenance::of(Source::Summary) }
    }

    /// A preference proposed by summary `node` (if known) and accepted by the user.
    pub(crate) fn proposal(node: Option<NodeId>) -> Provenance {
        Provenance { node, via: Some("accepted proposal".into()), ..Provenance::of(Source::Proposal) }
    }

    /// No source recorded.
    pub fn unknown() -> Provenance {
        Provenance::of(Source::Unknown)
    }

    /// This source, writing into a near-duplicate memory of another key: the version keeps
    /// that memory's key and title (the label its readers know), so the writer's own key and
    /// title are recorded here. A forget that erases the memory's other sources gives the
    /// kept text back its own label from them, instead of keeping the erased text's.
    pub fn merged_into_twin(
        self,
        proposed_key: &str,
        proposed_title: &str,
        likeness: impl std::fmt::Display,
    ) -> Provenance {
        let via = self.via.as_deref().unwrap_or("summary facts");
        Provenance {
            via: Some(format!(
                "{via}; a near-duplicate {likeness}{PROPOSED_KEY}{proposed_key}{TITLED}{proposed_title}"
            )),
            ..self
        }
    }
}

/// What [`Provenance::merged_into_twin`] writes before the proposed key; keys are letters,
/// digits and `_` ([`crate::memories::normalize_key`]), so the key ends at [`TITLED`], and the
/// title runs to the end.
const PROPOSED_KEY: &str = ", proposed as key ";

const TITLED: &str = " titled: ";

/// The key and title a version's writer proposed, when it was merged into a near-duplicate
/// memory (see [`Provenance::merged_into_twin`]); `None` for a version written under the
/// memory's own key.
pub fn proposed_label(via: Option<&str>) -> Option<(&str, &str)> {
    let (_, rest) = via?.split_once(PROPOSED_KEY)?;
    let (key, title) = rest.split_once(TITLED)?;
    (!key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || c == '_')).then_some((key, title))
}

/// One version of a memory: its text then, when it was written and replaced, and its source.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryVersion {
    /// The title then.
    pub title: String,
    /// The content then.
    pub content: String,
    /// When it was written.
    pub written_at: DateTime<Utc>,
    /// When an update replaced it; `None` for the current version.
    pub replaced_at: Option<DateTime<Utc>>,
    /// Since when it was true (schema 14): the time a supersede gave, else when it was written.
    pub valid_from: DateTime<Utc>,
    /// Until when it was true: the time a supersede gave, else when it was replaced; `None`
    /// while it is.
    pub valid_to: Option<DateTime<Utc>>,
    /// Where it came from.
    pub provenance: Provenance,
}
