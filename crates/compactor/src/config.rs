//! The compactor's settings: one plain struct, validated once.

use serde::{Deserialize, Serialize};
use strata_llm::RetryPolicy;
use strata_seam::memories::MemoryTtls;
use strata_seam::secrets::Secrets;

use crate::error::{Error, Result};
use crate::tokens::{Encoding, TokenCounter};
use crate::tool_names::ToolNames;

/// Every threshold of the compaction cycle and of context assembly.
///
/// Deserializes from the `[compactor]` table of strata's TOML file; missing fields take the
/// defaults below and unknown fields are refused, so a typo never silently keeps a default.
/// Call [`CompactorConfig::validate`] once after reading it (the [`crate::Compactor`]
/// constructor does).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactorConfig {
    /// The model the context is assembled for; picks the tokenizer (default `gpt-4o-mini`).
    pub model: String,
    /// Overrides the tokenizer the model name implies (`cl100k_base` or `o200k_base`).
    pub encoding: Option<Encoding>,
    /// The model's context window in tokens (default 32,000).
    pub context_window_tokens: u32,
    /// Tokens kept free for the model's reply; the assembled context never exceeds
    /// `context_window_tokens - reserve_tokens` (default 4,000).
    pub reserve_tokens: u32,
    /// The first messages of a session, kept verbatim forever: typically the system prompt and
    /// the first request (default 2). Shortened to end before a tool call whose results it
    /// would cut off, so a call is never split from its result and a tool's output is never
    /// protected forever.
    pub head_messages: u32,
    /// At most this many of the newest turns are protected as the tail (default 4). The newest
    /// turn is always protected, whatever its size.
    pub tail_turns: u32,
    /// Older tail turns leave the tail once the tail would hold more than this many tokens,
    /// so a few huge turns cannot pin the whole window (default 8,000).
    pub tail_tokens: u32,
    /// Compaction starts when the context would exceed this share of the budget
    /// (`context_window_tokens - reserve_tokens`; default 0.75) ...
    pub trigger_ratio: f64,
    /// ... and folds the oldest turns until it is under this share (default 0.5). A chat that
    /// fits comfortably is never folded, whatever its length: 39k tokens in a 200k window stay
    /// verbatim. 0 and 0 fold whenever the floor below allows (the behaviour before ratios).
    pub target_ratio: f64,
    /// A floor against tiny Level-0 nodes: one is written only when the compactable middle
    /// holds at least this many tokens (default 1,000) ...
    pub leaf_min_tokens: u32,
    /// ... and at least this many whole turns (default 2).
    pub leaf_min_turns: u32,
    /// A Level-0 node summarizes the oldest whole turns up to about this many tokens
    /// (default 4,000; one turn larger than that becomes a node of its own).
    pub leaf_chunk_tokens: u32,
    /// The K of "2K -> K": when 2K roots of one level exist, the oldest K are merged into one
    /// node a level up (default 4).
    pub context_consolidation_k: u32,
    /// Most summarizer calls (leaves, merges, re-summaries) one `compact` call makes, which
    /// bounds the time spent before an LLM call (default 16).
    pub max_rounds: u32,
    /// Tokens the summarizer is asked to stay under for one node (default 400).
    pub summary_target_tokens: u32,
    /// A summary larger than this is rejected as oversized (default 1,200).
    pub summary_max_tokens: u32,
    /// A summary may hold at most this share of its sources' tokens, for Level-0 nodes and
    /// merges alike (default 0.5); a larger one is rejected as not compressed.
    pub summary_max_share: f64,
    /// Words per run compared by the near-copy check (default 8).
    pub near_copy_ngram: u32,
    /// A summary from a summarizer that paraphrases (an LLM) is rejected as a near-copy when more
    /// than this share of its `near_copy_ngram`-word runs occur word for word in its sources
    /// (default 0.6).
    pub near_copy_max_share: f64,
    /// After a rejected summary, the same sources are asked for again this many times in the
    /// same compaction, each time with a note of what was wrong (default 1).
    pub summary_retries: u32,
    /// Tokens of the persona's memory keys and titles a summary of messages is shown, so that
    /// its memory updates reuse a key instead of starting a twin: those named in the sources
    /// first, then the most recently updated (default 300, about 25 memories; 0 shows none).
    pub known_memory_tokens: u32,
    /// Tokens the scaffold may spend on the bodies of the newest roots (default 3,000).
    pub scaffold_body_tokens: u32,
    /// A message outside head and tail larger than this is sent as a stub naming its id and
    /// how to read it (default 2,000).
    pub oversized_message_tokens: u32,
    /// The largest message `append` and `strata ingest` accept, in bytes of its content, tool
    /// calls, name and call id (default 1 MiB, about 250,000 tokens of English: more than
    /// every model's window but the largest, so nothing a model could read whole is refused).
    /// Larger ones are refused with an error naming this setting: counting one message costs
    /// time and memory in proportion to its size (a 50 MB one took a minute and 2.6 GB), and a
    /// context holds it only as a stub anyway. Store a huge tool output as a file and send its
    /// path.
    pub max_message_bytes: u32,
    /// A turn starting more than this many seconds after the previous message is a bootstrap
    /// turn (default 1,800: 30 minutes).
    pub idle_gap_secs: u64,
    /// The latest request of a bootstrap turn; empty for the default, the user's template of
    /// DESIGN.md §3 ([`crate::context::bootstrap_template`]). Placeholders: `{active_role}`,
    /// `{preferences}`, `{memories}`, `{time}`, `{request}` (required).
    pub bootstrap_template: String,
    /// The latest request of a regular turn; empty for the default
    /// ([`crate::context::REGULAR_TEMPLATE`]). Same placeholders; `{memories}` is always empty here.
    pub regular_template: String,
    /// Tokens of long-term memories (`progress`, `memo`) shown on bootstrap turns after the
    /// preferences, those the recalled block's search ranks first, then the newest; the rest
    /// are named as available through `memory_list`. 0 shows none (default 600).
    pub injected_memory_tokens: u32,
    /// The newest folded turns are shown verbatim again after the scaffold, whole turns only,
    /// within [`CompactorConfig::refill_tokens`]: the share of the budget the live part never
    /// reaches (compaction starts at `trigger_ratio`) less the recalled block's
    /// `proactive_tokens`. The forest alone decides which turns, so they are chosen when a
    /// compaction runs and stay byte-identical until the next one (default true).
    pub refill_folded_turns: bool,
    /// A compaction folds deep enough that this many more turns, each as large as the recent
    /// ones, fit before the trigger: its target is the lower of `target_ratio` and the trigger
    /// less that many recent turns. Each compaction changes the prompt's prefix (a provider's
    /// cache misses once), so a chat of large turns folds deeper rather than more often
    /// (default 12; 0 leaves the target at `target_ratio`).
    pub turns_between_compactions: u32,
    /// After this many consecutive failed summarizer calls, chunks are archived as flagged
    /// `raw-archive` digests so the context still fits (default 3).
    pub failures_before_raw_archive: u32,
    /// How the OpenAI-compatible client retries.
    pub retry: RetryPolicy,
    /// Tokens every request spends besides its messages: the tool definitions offered with it
    /// and the template text around them ([`TokenCounter::tools`]). Subtracted from the budget
    /// before assembly. Not read from the `[compactor]` table: the engine counts the tools it
    /// offers.
    #[serde(skip)]
    pub request_overhead_tokens: u32,
    /// When memories expire: an expired one is not injected. Not read from the `[compactor]`
    /// table: it is `[recall.memory_ttls]`, so the tools and the injection always agree on what
    /// has expired. Default: nothing expires.
    #[serde(skip)]
    pub memory_ttls: MemoryTtls,
    /// The names of the tools the context's texts point the model to (the scaffold, stubs,
    /// notes, the bootstrap guidelines); `None` mentions no tool. Not read from the
    /// `[compactor]` table: the engine fills it from `strata_recall::Tool`.
    #[serde(skip)]
    pub tool_names: Option<ToolNames>,
    /// The most tokens the recalled block may add to the latest request; 0 asks for none. Not
    /// read from the `[compactor]` table: it is `[recall] proactive_tokens`, with the search.
    #[serde(skip)]
    pub proactive_tokens: u32,
    /// The secrets masked in summaries (their facts too) and the recalled block. Not read from
    /// the `[compactor]` table: it is `[recall] secret_patterns`, so the tools and compaction
    /// mask the same. Default: the built-in formats.
    #[serde(skip)]
    pub secrets: Secrets,
}

impl Default for CompactorConfig {
    fn default() -> CompactorConfig {
        CompactorConfig {
            model: "gpt-4o-mini".into(),
            encoding: None,
            context_window_tokens: 32_000,
            reserve_tokens: 4_000,
            head_messages: 2,
            tail_turns: 4,
            tail_tokens: 8_000,
            trigger_ratio: 0.75,
            target_ratio: 0.5,
            leaf_min_tokens: 1_000,
            leaf_min_turns: 2,
            leaf_chunk_tokens: 4_000,
            context_consolidation_k: 4,
            max_rounds: 16,
            summary_target_tokens: 400,
            summary_max_tokens: 1_200,
            summary_max_share: 0.5,
            near_copy_ngram: 8,
            near_copy_max_share: 0.6,
            summary_retries: 1,
            known_memory_tokens: 300,
            scaffold_body_tokens: 3_000,
            oversized_message_tokens: 2_000,
            max_message_bytes: 1 << 20,
            idle_gap_secs: 30 * 60,
            injected_memory_tokens: 600,
            refill_folded_turns: true,
            turns_between_compactions: 12,
            bootstrap_template: String::new(),
            regular_template: String::new(),
            failures_before_raw_archive: 3,
            retry: RetryPolicy::default(),
            request_overhead_tokens: 0,
            memory_ttls: MemoryTtls::NEVER,
            tool_names: None,
            proactive_tokens: 0,
            secrets: Secrets::default(),
        }
    }
}

/// A [`CompactorConfig`] whose rules hold: what a [`crate::Compactor`] and an
/// [`crate::Assembler`] run on. It is made only by validating ([`CompactorSettings::new`]) and
/// only read afterwards, so the rules are checked once, where the settings are read (ripgrep's
/// `LowArgs` -> `HiArgs`), and never again by what runs on them.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactorSettings(CompactorConfig);

impl CompactorSettings {
    /// `config` once it passed [`CompactorConfig::validate`].
    pub fn new(config: CompactorConfig) -> Result<CompactorSettings> {
        config.validate()?;
        Ok(CompactorSettings(config))
    }
}

impl std::ops::Deref for CompactorSettings {
    type Target = CompactorConfig;

    fn deref(&self) -> &CompactorConfig {
        &self.0
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::Config { field, reason: reason.into() }
}

impl CompactorConfig {
    /// The token budget of an assembled context: `context_window_tokens - reserve_tokens -
    /// request_overhead_tokens`.
    pub fn budget(&self) -> u32 {
        self.context_window_tokens
            .saturating_sub(self.reserve_tokens)
            .saturating_sub(self.request_overhead_tokens)
    }

    /// The quality gate's rules; `paraphrases` is the summarizer's
    /// [`crate::Summarizer::paraphrases`].
    pub(crate) fn gate(&self, paraphrases: bool) -> crate::summarizer::Gate {
        crate::summarizer::Gate {
            max_tokens: self.summary_max_tokens,
            max_share: self.summary_max_share,
            ngram: self.near_copy_ngram as usize,
            near_copy_max_share: paraphrases.then_some(self.near_copy_max_share),
        }
    }

    /// The tokenizer for the configured model (or the explicit encoding).
    pub fn token_counter(&self) -> TokenCounter {
        match self.encoding {
            Some(encoding) => TokenCounter::new(encoding),
            None => TokenCounter::for_model(&self.model),
        }
    }

    /// The context size (tokens) above which compaction starts, and the one it folds down to.
    pub fn trigger_and_target(&self) -> (u64, u64) {
        let budget = f64::from(self.budget());
        ((self.trigger_ratio * budget) as u64, (self.target_ratio * budget) as u64)
    }

    /// Tokens the refilled folded turns may take (0 with `refill_folded_turns` off): the part
    /// of the budget above `trigger_ratio`, which the live part never reaches between
    /// compactions, less `proactive_tokens`, which the recalled block may take. It depends on
    /// the settings alone, so the refill is the same on every call until the next compaction,
    /// and the refill and the block both fit whenever the live part is under the trigger.
    pub fn refill_tokens(&self) -> u32 {
        if !self.refill_folded_turns {
            return 0;
        }
        let above_trigger = (f64::from(self.budget()) * (1.0 - self.trigger_ratio)) as u32;
        above_trigger.saturating_sub(self.proactive_tokens)
    }

    /// The idle gap after which a turn is a bootstrap turn.
    pub fn idle_gap(&self) -> chrono::TimeDelta {
        // More than TimeDelta can hold is "never idle long enough": the longest gap it can.
        i64::try_from(self.idle_gap_secs)
            .ok()
            .and_then(chrono::TimeDelta::try_seconds)
            .unwrap_or(chrono::TimeDelta::MAX)
    }

    /// Refuses a message larger than [`CompactorConfig::max_message_bytes`], before anything
    /// counts or stores it: the whole message as sent (its body, media bytes included), or
    /// its columns when it has no body.
    pub fn check_message_size(&self, message: &strata_seam::NewMessage) -> Result<()> {
        let columns = || {
            message.content.len()
                + message.tool_calls.as_ref().map_or(0, |calls| calls.to_string().len())
                + message.name.as_ref().map_or(0, String::len)
                + message.tool_call_id.as_ref().map_or(0, String::len)
        };
        let bytes = message.body.as_ref().map_or_else(columns, String::len);
        if bytes > self.max_message_bytes as usize {
            return Err(Error::MessageTooLarge { bytes: bytes as u64, limit: self.max_message_bytes });
        }
        Ok(())
    }

    /// Checks every rule between the settings; the first broken one is the error.
    pub fn validate(&self) -> Result<()> {
        if self.model.trim().is_empty() {
            return Err(invalid("model", "name the model the context is for"));
        }
        if self.reserve_tokens >= self.context_window_tokens {
            return Err(invalid("reserve_tokens", "must be smaller than context_window_tokens"));
        }
        if self.budget() < 512 {
            return Err(invalid(
                "context_window_tokens",
                format!(
                    "context_window_tokens - reserve_tokens - {} tokens of tool definitions must leave at least 512 tokens",
                    self.request_overhead_tokens
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.trigger_ratio) {
            return Err(invalid("trigger_ratio", "must be between 0 and 1"));
        }
        if !(0.0..=self.trigger_ratio).contains(&self.target_ratio) {
            return Err(invalid("target_ratio", "must be between 0 and trigger_ratio"));
        }
        for (field, template) in
            [("bootstrap_template", &self.bootstrap_template), ("regular_template", &self.regular_template)]
        {
            if !template.is_empty() && !template.contains("{request}") {
                return Err(invalid(field, "must contain {request}, or the request would not be sent"));
            }
        }
        if self.tail_turns == 0 {
            return Err(invalid("tail_turns", "at least the newest turn must be protected"));
        }
        if self.leaf_min_turns == 0 {
            return Err(invalid("leaf_min_turns", "must be at least 1"));
        }
        if self.leaf_chunk_tokens < 64 {
            return Err(invalid("leaf_chunk_tokens", "must be at least 64 tokens"));
        }
        if self.context_consolidation_k < 2 {
            return Err(invalid("context_consolidation_k", "merging needs K of at least 2"));
        }
        if self.max_rounds == 0 {
            return Err(invalid("max_rounds", "must be at least 1"));
        }
        if self.summary_target_tokens < 32 {
            return Err(invalid("summary_target_tokens", "must be at least 32 tokens"));
        }
        if self.summary_max_tokens < self.summary_target_tokens {
            return Err(invalid("summary_max_tokens", "must not be smaller than summary_target_tokens"));
        }
        if !(self.summary_max_share > 0.0 && self.summary_max_share < 1.0) {
            return Err(invalid("summary_max_share", "must be above 0 and below 1"));
        }
        if self.near_copy_ngram < 3 {
            return Err(invalid("near_copy_ngram", "must be at least 3 words"));
        }
        if !(self.near_copy_max_share > 0.0 && self.near_copy_max_share <= 1.0) {
            return Err(invalid("near_copy_max_share", "must be above 0 and at most 1"));
        }
        if self.scaffold_body_tokens >= self.budget() / 2 {
            return Err(invalid(
                "scaffold_body_tokens",
                format!(
                    "must be less than half of the context budget ({} tokens once {} tokens of tool definitions are taken off)",
                    self.budget(),
                    self.request_overhead_tokens
                ),
            ));
        }
        if self.max_message_bytes < 1024 {
            return Err(invalid("max_message_bytes", "must be at least 1024 bytes"));
        }
        if self.oversized_message_tokens < 64 {
            return Err(invalid("oversized_message_tokens", "must be at least 64 tokens"));
        }
        if self.idle_gap_secs == 0 {
            return Err(invalid("idle_gap_secs", "must be at least one second"));
        }
        if self.failures_before_raw_archive == 0 {
            return Err(invalid("failures_before_raw_archive", "must be at least 1"));
        }
        let retry = &self.retry;
        if retry.max_attempts == 0 {
            return Err(invalid("retry.max_attempts", "must be at least 1"));
        }
        if retry.timeout_ms == 0 {
            return Err(invalid("retry.timeout_ms", "must be positive"));
        }
        if retry.initial_backoff_ms > retry.max_backoff_ms {
            return Err(invalid("retry.initial_backoff_ms", "must not exceed retry.max_backoff_ms"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_round_trip() {
        let config = CompactorConfig::default();
        config.validate().unwrap();
        let text = serde_json::to_string(&config).unwrap();
        assert_eq!(serde_json::from_str::<CompactorConfig>(&text).unwrap(), config);
        // Missing fields take their defaults.
        let partial: CompactorConfig = serde_json::from_str(r#"{"context_window_tokens": 8000}"#).unwrap();
        assert_eq!(partial.context_window_tokens, 8000);
        assert_eq!(partial.reserve_tokens, 4_000);
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<CompactorConfig>(r#"{"context_windw_tokens": 8000}"#).is_err());
        assert!(serde_json::from_str::<CompactorConfig>(r#"{"retry": {"attempts": 2}}"#).is_err());
    }

    #[test]
    fn broken_rules_name_the_field() {
        type Breaks = fn(&mut CompactorConfig);
        let cases: [(Breaks, &str); 9] = [
            (|c| c.summary_max_share = 1.0, "summary_max_share"),
            (|c| c.near_copy_ngram = 2, "near_copy_ngram"),
            (|c| c.near_copy_max_share = f64::NAN, "near_copy_max_share"),
            (|c| c.reserve_tokens = c.context_window_tokens, "reserve_tokens"),
            (|c| c.context_consolidation_k = 1, "context_consolidation_k"),
            (|c| c.tail_turns = 0, "tail_turns"),
            (|c| c.summary_max_tokens = 10, "summary_max_tokens"),
            (|c| c.retry.max_attempts = 0, "retry.max_attempts"),
            (|c| c.max_rounds = 0, "max_rounds"),
        ];
        for (breaks, expected) in cases {
            let mut config = CompactorConfig::default();
            breaks(&mut config);
            match config.validate() {
                Err(Error::Config { field, .. }) => assert_eq!(field, expected),
                other => panic!("{expected}: {other:?}"),
            }
        }
    }
}
