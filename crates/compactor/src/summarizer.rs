//! The summarizer interface shared by the LLM client and the offline extractive summarizer.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::SummarizeError;
use crate::tokens::TokenCounter;

/// A boxed, sendable future: what [`Summarizer::summarize`] returns, so the trait can be used as
/// `Arc<dyn Summarizer>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What is being summarized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Whole turns of chat messages, into a Level-0 node.
    Messages,
    /// Summary nodes of one level, into a node one level up.
    Summaries,
}

/// One source of a summary: a message, or a summary node being merged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceItem {
    /// How the summary may cite it: `message 812 (seq 40)` or `node 17`.
    pub reference: String,
    /// `user`, `assistant`, `tool`, `system`, or `summary` for a node.
    pub role: String,
    /// Who sent it, when the message names its sender (`Caroline`, `Priya`); `None` for
    /// nodes, tool results and messages known only by their role.
    pub name: Option<String>,
    /// The tool (for a tool result) or the tools called (for an assistant message), if any.
    pub tool: Option<String>,
    /// When it was sent (for a node: when its range starts).
    pub time: DateTime<Utc>,
    /// The text: message content (with its tool calls), or a node's headline and body.
    pub text: String,
}

/// A request for one summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRequest {
    /// Messages or summaries.
    pub kind: SourceKind,
    /// The level of the node being written.
    pub level: u32,
    /// The persona whose conversation this is.
    pub persona: String,
    /// The sources, oldest first.
    pub items: Vec<SourceItem>,
    /// Tokens of the sources.
    pub source_tokens: u32,
    /// Tokens the summary should stay under (headline and body together).
    pub target_tokens: u32,
}

/// A summary as a summarizer returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// One sentence.
    pub headline: String,
    /// The structured body: timeline events, key decisions, pitfalls, files and paths, numbers.
    pub body: String,
}

/// Writes summaries. Implementations must be cheap to share (`Arc<dyn Summarizer>`) and must
/// not touch the database: the compactor calls them with no connection held.
pub trait Summarizer: Send + Sync + fmt::Debug {
    /// The name stored in `summary_nodes.summarizer`: the model id, or `extractive`.
    fn name(&self) -> &str;

    /// Summarizes the sources of `request`.
    fn summarize<'a>(&'a self, request: &'a SummaryRequest)
    -> BoxFuture<'a, Result<Summary, SummarizeError>>;
}

/// The one-line form of a headline: whitespace collapsed, at most `max_chars` characters.
pub(crate) fn one_line(text: &str, max_chars: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate_chars(&collapsed, max_chars)
}

/// `text` cut to at most `max_chars` characters, with an ellipsis when cut.
pub(crate) fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Headlines longer than this many characters are cut: they are listed for every root.
pub(crate) const HEADLINE_MAX_CHARS: usize = 240;

/// Checks a summary before it is stored and returns it cleaned up with its token count. Empty
/// parts, an oversized summary, and one not shorter than its sources are refused.
pub(crate) fn check(
    summary: Summary,
    source_tokens: u32,
    max_tokens: u32,
    counter: &TokenCounter,
) -> Result<(Summary, u32), SummarizeError> {
    let headline = one_line(&summary.headline, HEADLINE_MAX_CHARS);
    let body = summary.body.trim().to_owned();
    if headline.is_empty() {
        return Err(SummarizeError::Rejected("the headline is empty".into()));
    }
    if body.is_empty() {
        return Err(SummarizeError::Rejected("the body is empty".into()));
    }
    let tokens = counter.text(&headline) + counter.text(&body);
    if tokens > max_tokens {
        return Err(SummarizeError::Rejected(format!(
            "{tokens} tokens is over the limit of {max_tokens} (summary_max_tokens)"
        )));
    }
    if tokens >= source_tokens {
        return Err(SummarizeError::Rejected(format!(
            "{tokens} tokens is not shorter than its {source_tokens} source tokens"
        )));
    }
    Ok((Summary { headline, body }, tokens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::Encoding;

    #[test]
    fn empty_oversized_and_longer_summaries_are_rejected() {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        let summary = |h: &str, b: &str| Summary { headline: h.into(), body: b.into() };
        assert!(check(summary(" \n", "body"), 100, 100, &counter).is_err());
        assert!(check(summary("head", "  "), 100, 100, &counter).is_err());
        let long = "word ".repeat(50);
        assert!(check(summary("head", &long), 1000, 20, &counter).is_err(), "oversized");
        assert!(check(summary("head", &long), 30, 1000, &counter).is_err(), "not shorter");
        let (ok, tokens) = check(summary("  Two\n lines ", " body "), 100, 100, &counter).unwrap();
        assert_eq!(ok.headline, "Two lines");
        assert_eq!(ok.body, "body");
        assert_eq!(tokens, counter.text("Two lines") + counter.text("body"));
    }
}
