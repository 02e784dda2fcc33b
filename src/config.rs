//! strata's configuration: one TOML file with every setting, defaults embedded, overridable
//! by the environment and by flags.

use std::path::Path;

use serde::{Deserialize, Serialize};
use strata_compactor::CompactorConfig;
use strata_recall::RecallConfig;

use crate::error::{Error, Result};

/// The longest memory time-to-live, about 1,000 years: longer ones are "never".
const MAX_TTL_DAYS: u32 = 365_000;

/// The commented example file; its values are the defaults.
pub const EXAMPLE: &str = include_str!("../strata.example.toml");

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SummarizerKind {
    /// Offline, deterministic, no API key.
    #[default]
    Extractive,
    /// An OpenAI-compatible chat-completions endpoint.
    Openai,
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
        }
    }
}

impl SummarizerConfig {
    /// The API key from the configured variable, else `OPENAI_API_KEY`.
    pub fn api_key(&self) -> Option<String> {
        std::env::var(&self.api_key_env)
            .ok()
            .or_else(|| std::env::var("OPENAI_API_KEY").ok())
            .filter(|k| !k.is_empty())
    }

    /// The settings of the OpenAI-compatible client these settings describe.
    pub fn openai(&self, retry: &strata_compactor::RetryPolicy) -> strata_compactor::OpenAiConfig {
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

impl Config {
    /// Loads the configuration: the embedded defaults, then `file` (if given), then
    /// `STRATA_<SECTION>_<KEY>` variables from `env`. Unknown keys and bad values are errors
    /// naming the key.
    pub fn load(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config> {
        let mut table: toml::Table =
            toml::from_str(EXAMPLE).map_err(|e| Error::Config(format!("built-in defaults: {e}")))?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
            let overlay: toml::Table = toml::from_str(&text)
                .map_err(|e| Error::Config(format!("{}: {}", path.display(), e.message())))?;
            merge(&mut table, overlay);
        }
        let env: Vec<(String, String)> =
            env.into_iter().filter(|(key, _)| key.starts_with("STRATA_")).collect();
        apply_env(&mut table, &env);
        // Round-trip through text so a bad value's error can name the line it sits on.
        let text = toml::to_string(&table).map_err(|e| Error::Config(e.to_string()))?;
        let config: Config = toml::from_str(&text).map_err(|e| Error::Config(describe(&e, &text)))?;
        config.validate()?;
        Ok(config)
    }

    /// The compactor's settings with what other sections decide: memories expire for the
    /// injection exactly when they expire for the tools (`[recall.memory_ttls]`).
    pub fn compactor(&self) -> strata_compactor::CompactorConfig {
        let mut compactor = self.compactor.clone();
        let max_age = |ttl: strata_recall::Ttl| match ttl {
            strata_recall::Ttl::Never => None,
            strata_recall::Ttl::Days(days) => chrono::TimeDelta::try_days(i64::from(days)),
        };
        let ttls = &self.recall.memory_ttls;
        compactor.preferences_max_age = max_age(ttls.user_preferences);
        compactor.memories_max_age = [max_age(ttls.progress), max_age(ttls.memo)];
        compactor
    }

    /// The summarizer these settings choose: the extractive one, or the OpenAI-compatible
    /// client (with `[summarizer] input_cap_tokens` applied), counting with the compactor's
    /// token encoding. The one place a summarizer is built from settings.
    pub fn summarizer(&self) -> Result<std::sync::Arc<dyn strata_compactor::Summarizer>> {
        use strata_compactor::{CappedSummarizer, ExtractiveSummarizer, OpenAiSummarizer};
        let counter = self.compactor.token_counter();
        Ok(match self.summarizer.kind {
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

    /// Checks the rules between settings.
    pub fn validate(&self) -> Result<()> {
        self.compactor.validate().map_err(|e| Error::Config(e.to_string()))?;
        let temperature = self.summarizer.temperature;
        if !(temperature.is_finite() && (0.0..=2.0).contains(&temperature)) {
            return Err(Error::Config(format!(
                "summarizer.temperature {temperature} must be between 0 and 2"
            )));
        }
        let recall = &self.recall;
        let invalid = |key: &str, rule: &str| Err(Error::Config(format!("recall.{key} {rule}")));
        for (key, value) in
            [("semantic_weight", recall.semantic_weight), ("keyword_weight", recall.keyword_weight)]
        {
            if !(value.is_finite() && value >= 0.0) {
                return invalid(key, "must be a number of zero or more");
            }
        }
        if let Err(err) = strata_recall::model_spec(&recall.embed_model) {
            return invalid("embed_model", &format!("is not usable: {err}"));
        }
        for (key, value) in [
            ("min_similarity", recall.min_similarity),
            ("near_duplicate_similarity", recall.near_duplicate_similarity),
            ("near_duplicate_meaning", recall.near_duplicate_meaning),
        ] {
            if !(-1.0..=1.0).contains(&value) {
                return invalid(key, "must be a cosine similarity between -1 and 1");
            }
        }
        if !(1..=strata_store::MAX_CHUNKS).contains(&recall.embed_max_chunks) {
            return invalid("embed_max_chunks", "must be between 1 and 32");
        }
        if recall.default_limit == 0 || recall.max_limit == 0 || recall.embed_batch_size == 0 {
            return invalid("default_limit, max_limit and embed_batch_size", "must be at least 1");
        }
        for (category, ttl) in [
            ("user_preferences", recall.memory_ttls.user_preferences),
            ("progress", recall.memory_ttls.progress),
            ("memo", recall.memory_ttls.memo),
        ] {
            if matches!(ttl, strata_recall::Ttl::Days(days) if days > MAX_TTL_DAYS) {
                return invalid(
                    &format!("memory_ttls.{category}"),
                    &format!("is at most {MAX_TTL_DAYS} days (or \"never\")"),
                );
            }
        }
        Ok(())
    }

    /// The effective configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }
}

/// The error's message with the setting it is about: `... (at [compactor] tail_turns = "many")`.
fn describe(error: &toml::de::Error, text: &str) -> String {
    let Some(span) = error.span() else { return error.message().to_owned() };
    let before = &text[..span.start.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
    let section = before.lines().rev().find(|line| line.trim_start().starts_with('[')).unwrap_or("").trim();
    format!("{} (at {section} {})", error.message(), text[line_start..line_end].trim())
}

fn merge(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(overlay)) => merge(inner, overlay),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets every leaf `a.b.c` that has a `STRATA_A_B_C` variable. Optional settings absent from
/// the defaults are reachable as well through the keys listed in [`OPTIONAL_KEYS`].
fn apply_env(table: &mut toml::Table, env: &[(String, String)]) {
    let mut paths = Vec::new();
    collect_paths(table, &mut Vec::new(), &mut paths);
    paths.extend(OPTIONAL_KEYS.iter().map(|path| path.iter().map(|s| (*s).to_owned()).collect()));
    for path in paths {
        let name = format!("STRATA_{}", path.join("_").to_ascii_uppercase());
        if let Some((_, raw)) = env.iter().find(|(key, _)| *key == name) {
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.clone()));
            set(table, &path, value);
        }
    }
}

/// Settings that have no default value, so they are not in the example file's active lines.
const OPTIONAL_KEYS: &[&[&str]] = &[&["compactor", "encoding"], &["recall", "embed_assets"]];

fn collect_paths(table: &toml::Table, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in table {
        prefix.push(key.clone());
        match value {
            toml::Value::Table(inner) => collect_paths(inner, prefix, out),
            _ => out.push(prefix.clone()),
        }
        prefix.pop();
    }
}

fn set(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let (last, parents) = path.split_last().expect("paths are never empty");
    let mut current = table;
    for key in parents {
        current = match current.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
            toml::Value::Table(inner) => inner,
            _ => return,
        };
    }
    current.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_is_exactly_the_defaults() {
        let parsed: Config = toml::from_str(EXAMPLE).unwrap();
        assert_eq!(parsed, Config::default());
        assert_eq!(Config::load(None, []).unwrap(), Config::default());
    }

    #[test]
    fn example_file_names_every_setting() {
        let example: toml::Table = toml::from_str(EXAMPLE).unwrap();
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        let (mut in_example, mut in_defaults) = (Vec::new(), Vec::new());
        collect_paths(&example, &mut Vec::new(), &mut in_example);
        collect_paths(&defaults, &mut Vec::new(), &mut in_defaults);
        // Settings without a default (None) are absent from both; they are commented in the
        // example and reachable from the environment through OPTIONAL_KEYS.
        for path in in_defaults {
            assert!(in_example.contains(&path), "strata.example.toml lacks {}", path.join("."));
        }
        for optional in OPTIONAL_KEYS {
            assert!(EXAMPLE.contains(&format!("# {} = ", optional[optional.len() - 1])), "{optional:?}");
        }
    }

    #[test]
    fn file_then_env_override_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "[compactor]\ncontext_window_tokens = 64000\ntail_turns = 6\n").unwrap();
        let env = [
            ("STRATA_COMPACTOR_TAIL_TURNS".to_owned(), "9".to_owned()),
            ("STRATA_SUMMARIZER_MODEL".to_owned(), "llama3.1:8b".to_owned()),
            ("STRATA_RECALL_EMBED_ASSETS".to_owned(), "/opt/assets".to_owned()),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ];
        let config = Config::load(Some(&path), env).unwrap();
        assert_eq!(config.compactor.context_window_tokens, 64_000);
        assert_eq!(config.compactor.tail_turns, 9, "env beats the file");
        assert_eq!(config.summarizer.model, "llama3.1:8b", "plain strings need no quotes");
        assert_eq!(config.recall.embed_assets.as_deref(), Some(Path::new("/opt/assets")));
    }

    #[test]
    fn mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "[compactor]\ncontext_window_tokns = 1\n").unwrap();
        let err = Config::load(Some(&path), []).unwrap_err().to_string();
        assert!(err.contains("context_window_tokns"), "{err}");
        let err =
            Config::load(None, [("STRATA_COMPACTOR_RESERVE_TOKENS".into(), "99999".into())]).unwrap_err();
        assert!(err.to_string().contains("reserve_tokens"), "{err}");
        for (key, value) in [
            ("STRATA_RECALL_SEMANTIC_WEIGHT", "nan"),
            ("STRATA_RECALL_EMBED_MAX_CHUNKS", "0"),
            ("STRATA_RECALL_EMBED_MODEL", "\"word2vec\""),
            ("STRATA_RECALL_MIN_SIMILARITY", "7.0"),
            ("STRATA_RECALL_MEMORY_TTLS_USER_PREFERENCES", "4000000000"),
        ] {
            let err = Config::load(None, [(key.into(), value.into())]).unwrap_err().to_string();
            let setting = key.trim_start_matches("STRATA_RECALL_").to_ascii_lowercase();
            assert!(err.contains(&setting.replace("memory_ttls_", "memory_ttls.")), "{key}: {err}");
        }
        let err = Config::load(None, [("STRATA_COMPACTOR_TAIL_TURNS".into(), "many".into())]).unwrap_err();
        assert!(err.to_string().contains("[compactor] tail_turns = \"many\""), "{err}");
    }
}
