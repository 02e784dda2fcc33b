//! strata's configuration: one TOML file with every setting, defaults embedded, overridable
//! by the environment and by flags.

use serde::{Deserialize, Serialize};
use strata_compactor::{CompactorConfig, CompactorSettings, ToolNames};
use strata_recall::{RecallConfig, RecallSettings, Tool};

use crate::error::{Error, Result};

#[cfg(feature = "config-file")]
mod file;
#[cfg(feature = "config-file")]
pub use file::EXAMPLE;

/// The settings an engine runs on: a [`Config`] validated ([`Config::validate`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The compactor's, with what other sections decide ([`Config::compactor`]).
    pub compactor: CompactorSettings,
    /// recall's.
    pub recall: RecallSettings,
}

/// Every setting of strata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Thresholds of compaction and context assembly.
    pub compactor: CompactorConfig,
    /// Who writes the summaries.
    pub summarizer: SummarizerConfig,
    /// The recall tools and the embedding pipeline.
    pub recall: RecallConfig,
}

/// Which summarizer writes the summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerKind {
    /// Offline, deterministic, no API key.
    #[default]
    Extractive,
    /// An OpenAI-compatible chat-completions endpoint.
    Openai,
}

impl SummarizerKind {
    /// Every kind, in the order they are documented.
    pub const ALL: [SummarizerKind; 2] = [SummarizerKind::Extractive, SummarizerKind::Openai];

    /// The name in the configuration file: `extractive` or `openai`.
    pub fn as_str(self) -> &'static str {
        match self {
            SummarizerKind::Extractive => "extractive",
            SummarizerKind::Openai => "openai",
        }
    }
}

impl std::str::FromStr for SummarizerKind {
    type Err = String;

    fn from_str(name: &str) -> std::result::Result<SummarizerKind, String> {
        SummarizerKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| format!("unknown summarizer {name:?} (expected extractive or openai)"))
    }
}

/// Settings of the summarizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SummarizerConfig {
    /// extractive or openai.
    pub kind: SummarizerKind,
    /// Base URL of the OpenAI-compatible API.
    pub base_url: String,
    /// The model that writes summaries.
    pub model: String,
    /// The environment variable holding the API key.
    pub api_key_env: String,
    /// Run compaction in a background task (`Engine`): `prepare_context` never waits for a
    /// summarizer. The CLI compacts inline whatever this says.
    pub background: bool,
    /// Sampling temperature of an LLM summarizer's first attempt (0 to 2); a retry after a
    /// rejected summary adds a small step.
    pub temperature: f64,
    /// `max_tokens` of each summary request; 0 asks for twice the summary's target.
    pub max_output_tokens: u32,
    /// The most source tokens one summarizer request holds: a larger turn (a huge tool result)
    /// is cut into pieces summarized separately and then merged. 0 sends everything at once.
    pub input_cap_tokens: u32,
    /// The extractive summarizer judges restatements by their meaning, with sentence vectors
    /// from the local embedding model (when its files are present; about a second of model
    /// time per chunk). False (the default): by their words only, which on the evaluation set kept
    /// as many facts.
    pub sentence_vectors: bool,
}

impl Default for SummarizerConfig {
    fn default() -> SummarizerConfig {
        SummarizerConfig {
            kind: SummarizerKind::Extractive,
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: "STRATA_API_KEY".into(),
            background: false,
            temperature: 0.0,
            max_output_tokens: 0,
            input_cap_tokens: 16_000,
            sentence_vectors: false,
        }
    }
}

impl SummarizerConfig {
    /// The API key from the configured variable, else `OPENAI_API_KEY`
    /// ([`strata_llm::api_key`]); the summarizer and `strata chat` both use it.
    pub fn api_key(&self) -> Option<String> {
        strata_llm::api_key(&self.api_key_env)
    }

    /// The settings of the OpenAI-compatible client these settings describe.
    pub fn openai(&self, retry: &strata_llm::RetryPolicy) -> strata_compactor::OpenAiConfig {
        strata_compactor::OpenAiConfig {
            base_url: self.base_url.clone(),
            model: self.model.clone(),
            api_key: self.api_key(),
            retry: retry.clone(),
            temperature: self.temperature,
            max_output_tokens: self.max_output_tokens,
        }
    }
}

/// The names the compactor's texts point the model to, from recall's tools: renaming a tool
/// renames it in every text, and renaming a [`Tool`] variant fails to compile here.
fn tool_names() -> ToolNames {
    ToolNames {
        expand_summary: Tool::ExpandSummary.name().into(),
        view_message: Tool::ViewMessage.name().into(),
        memory_grep: Tool::MemoryGrep.name().into(),
        memory_search: Tool::MemorySearch.name().into(),
        memory_list: Tool::MemoryList.name().into(),
        view_chat_history_summary: Tool::ViewChatHistorySummary.name().into(),
    }
}

impl Config {
    /// The compactor's settings with what other sections decide: memories expire for the
    /// injection exactly when they expire for the tools (`[recall.memory_ttls]`), the tool
    /// definitions sent with every request are counted against the budget, and the texts that
    /// point to a tool use recall's names.
    pub fn compactor(&self) -> strata_compactor::CompactorConfig {
        let mut compactor = self.compactor.clone();
        compactor.memory_ttls = self.recall.memory_ttls;
        // Every chat request carries strata's tool definitions: the context leaves room for them,
        // whether an engine or `strata context` assembles it.
        compactor.request_overhead_tokens = compactor.token_counter().tools(&strata_recall::tool_specs());
        // The texts that point the model to a tool name recall's tools, by recall's names.
        compactor.tool_names = Some(tool_names());
        // The recalled block's search is recall's; its size is the context's.
        compactor.proactive_tokens = if self.recall.proactive { self.recall.proactive_tokens } else { 0 };
        // Summaries and the recalled block mask what the memory tools mask.
        compactor.secrets = self.recall.secret_patterns.clone();
        compactor
    }

    /// The summarizer these settings choose: the extractive one (with sentence vectors from
    /// the local embedding model when its files are present), or the OpenAI-compatible client
    /// (with `[summarizer] input_cap_tokens` applied), counting with the compactor's token
    /// encoding. The one place a summarizer is built from settings.
    pub fn summarizer(&self) -> Result<std::sync::Arc<dyn strata_compactor::Summarizer>> {
        self.summarizer_with(crate::SentenceModel::new(self.recall.clone()))
    }

    /// [`Config::summarizer`], the extractive one selecting with sentence vectors from
    /// `sentences` (when its model loads).
    pub(crate) fn summarizer_with(
        &self,
        sentences: crate::SentenceModel,
    ) -> Result<std::sync::Arc<dyn strata_compactor::Summarizer>> {
        use strata_compactor::{CappedSummarizer, ExtractiveSummarizer, OpenAiSummarizer};
        let counter = self.compactor.token_counter();
        Ok(match self.summarizer.kind {
            SummarizerKind::Extractive if self.summarizer.sentence_vectors => std::sync::Arc::new(
                ExtractiveSummarizer::new(counter).with_embedder(std::sync::Arc::new(sentences)),
            ),
            SummarizerKind::Extractive => std::sync::Arc::new(ExtractiveSummarizer::new(counter)),
            SummarizerKind::Openai => {
                let client = OpenAiSummarizer::new(self.summarizer.openai(&self.compactor.retry))?;
                match self.summarizer.input_cap_tokens {
                    0 => std::sync::Arc::new(client),
                    cap => std::sync::Arc::new(CappedSummarizer::new(client, cap, counter)),
                }
            }
        })
    }

    /// Checks every rule of the settings, once: the compactor's as they run
    /// ([`Config::compactor`], with what other sections decide), the summarizer's and recall's.
    /// Returns the compactor's and recall's settings, validated, for the engine to run on.
    pub fn validate(&self) -> Result<Settings> {
        let compactor = CompactorSettings::new(self.compactor())?;
        let temperature = self.summarizer.temperature;
        if !(temperature.is_finite() && (0.0..=2.0).contains(&temperature)) {
            return Err(Error::Config(format!(
                "summarizer.temperature {temperature} must be between 0 and 2"
            )));
        }
        let recall = RecallSettings::new(self.recall.clone())?;
        Ok(Settings { compactor, recall })
    }
}
