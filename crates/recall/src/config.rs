//! [`RecallConfig`]: every knob of the recall tools, with documented defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use strata_seam::search::Scan;
use strata_seam::secrets::Secrets;
// Expiry is the store's rule (it owns memories); `[recall] memory_ttls` is where it is set.
use strata_seam::memories::{MemoryTtls, Ttl};

/// Settings of the recall tools and the embedding pipeline.
///
/// Deserializes from the `[recall]` table of strata's TOML config; every field is optional
/// (the defaults below) and unknown fields are refused, so a typo is an error, not a silent
/// default.
///
/// ```toml
/// [recall]
/// embed_assets = "/opt/strata/embed-assets"   # default: $STRATA_EMBED_ASSETS or the user cache
/// default_limit = 10
/// max_limit = 50
/// memory_ttls = { user_preferences = 90, progress = "never", memo = "never" }
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecallConfig {
    /// Directory holding `onnxruntime/`, `all-MiniLM-L6-v2-q8/` and `all-MiniLM-L6-v2-int8/` (see
    /// `scripts/fetch-embed-assets.sh`). `None`: [`crate::embedding::default_assets_dir`].
    pub embed_assets: Option<PathBuf>,
    /// Results a search returns when the model gives no `limit`. Default 10.
    pub default_limit: usize,
    /// The largest `limit` honoured; larger ones are clamped. Default 50.
    pub max_limit: usize,
    /// Texts per embedding batch (about 32 is fastest and keeps memory near 0.3 GB). Default 32.
    pub embed_batch_size: usize,
    /// Most chunks (vectors) a long user, assistant or system message, summary or memory is
    /// embedded as, from its start; text past them is found by keywords only. At most 32.
    /// Default 8.
    pub embed_max_chunks: usize,
    /// Most chunks a tool result is embedded as, from its start, prefixed with the tool's name
    /// (`read_file: ...`). Tool output (file reads, logs, command output) is most of a coding
    /// agent's tokens and is found by its words (`memory_grep`) far better than by meaning; its
    /// first chunk says what the call was. At most 32. Default 1 (benches/README.md, "The
    /// embedding policy").
    pub embed_tool_chunks: usize,
    /// Backlog rows the worker reads per round (sorted by length, then batched). Default 256.
    pub embed_round_size: usize,
    /// ONNX Runtime's intra-op threads for the local model; 0 uses every core. Default 0.
    pub embed_threads: usize,
    /// Whether ONNX Runtime's idle threads spin. Default false: on this project's shared
    /// 2-core machines the model ran 1.57x faster without (benches/README.md).
    pub embed_spinning: bool,
    /// Where vectors come from: the local model (`embed_model`) or an OpenAI-compatible
    /// endpoint (`embed_endpoint`). Default local.
    pub embed_provider: EmbedProvider,
    /// The endpoint used when `embed_provider` is `openai`.
    pub embed_endpoint: EndpointSettings,
    /// The local embedding model (see `strata_recall::MODELS`). A database embedded with
    /// another model is re-embedded by the next `strata embed`. Default `all-MiniLM-L6-v2-q8` (int8
    /// arithmetic); `all-MiniLM-L6-v2` is the same model in fp32 arithmetic.
    pub embed_model: String,
    /// Weight of the semantic score in `memory_search`'s fusion (each side's scores are first
    /// scaled to 0..=1 over its candidates). Fitted on the evaluation set, where weights from
    /// 0.2 to 0.4 are within 2 points of the best; see benches/README.md. Default 0.3.
    pub semantic_weight: f64,
    /// Weight of the keyword (bm25) score in `memory_search`'s fusion. Default 0.7.
    pub keyword_weight: f64,
    /// Added to the fused score of a candidate that fits a question about time: for a question
    /// asking when ("When did ...", "what year"), a row that says when (a date, a weekday,
    /// "yesterday", "two months ago"); for one naming a date, a row said then or in the week
    /// after. 0 turns it off. Default 0.2.
    pub time_weight: f64,
    /// Added to the fused score of a message whose speaker (its `name`) the query names: a
    /// question about what someone said or did is mostly answered by that person's messages.
    /// 0 turns it off. Default 0.3.
    pub speaker_weight: f64,
    /// Weight of a second hop in `memory_search`: bm25 of the question's words with the
    /// distinctive words of the first three hits, scaled like the keyword side and added to the
    /// fused score (times how near the first keyword match came to the whole question); it finds
    /// rows that share what the first hits are about. 0 (no second hop, no second read) turns it
    /// off. Default 0.2.
    pub expansion_weight: f64,
    /// Added to a candidate message's fused score, times the better fused score of the messages
    /// just before and after it in its session (when they are candidates too): a turn that
    /// answers in other words ("It was Matt Patterson") sits beside the turn that names the
    /// topic ("What concert was it?"). 0 turns it off. Default 0.2 (benches/README.md, "The
    /// turn beside the match").
    pub neighbour_weight: f64,
    /// Semantic candidates less similar than this (cosine) to the query stay out of fusion.
    /// Default 0.0.
    pub min_similarity: f64,
    /// Candidates each side (semantic, keyword) contributes to fusion, before the limit.
    /// Default 50.
    pub search_candidates: usize,
    /// Chunks the 1-bit first pass of a vector search shortlists; the better half of them (by
    /// the query's floats against each chunk's bits) is re-scored exactly. 0 scans the float
    /// vectors exactly (sqlite-vec). Default 3,200: at 1,000,000 vectors they hold 98.5% of the
    /// exact 10 nearest (400 held 79%), and `memory_search` takes 49 ms against 836 ms for the
    /// exact scan; a persona whose chunks all fit the shortlist is re-scored whole, which is
    /// exact (benches/README.md, "Search at a million vectors").
    pub quantized_candidates: usize,
    /// Messages shown before and after the one `view_message` opens. Default 3.
    pub view_neighbours: usize,
    /// Characters of a message `view_message` returns per page, unless the call asks for
    /// another size (at most four times this). Default 8,000.
    pub view_page_chars: usize,
    /// Messages per page when `expand_summary` lists a Level-0 node's sources. Default 20.
    pub expand_page_size: usize,
    /// Characters of a message shown in lists (neighbours, expanded sources, semantic
    /// snippets) before it is cut; `view_message` shows the text itself, page by page. Default 600.
    pub excerpt_chars: usize,
    /// Summary roots whose body `view_chat_history_summary` includes (the newest ones; older
    /// roots show their headline only). Default 8.
    pub history_bodies: usize,
    /// Most roots `view_chat_history_summary` lists (the newest). Default 200.
    pub history_max_roots: usize,
    /// Newest not-yet-summarized messages `view_chat_history_summary` shows per session, so
    /// recent events of other threads are visible before they are summarized; 0 shows none.
    /// Default 6.
    pub history_recent_messages: usize,
    /// Two keys whose Levenshtein distance is at most this are near-duplicates. Default 2.
    pub near_duplicate_edits: usize,
    /// Two keys whose normalized Levenshtein similarity is at least this are near-duplicates.
    /// Default 0.8.
    pub near_duplicate_similarity: f64,
    /// Two memories of different keys whose texts (key words, title, content) have at least
    /// this cosine similarity are near-duplicates even when spelled differently, when both
    /// keys and titles are in the same script (`user_timezone` / `time_zone_of_the_user`, or
    /// `标日学习` / `日语教材`). Measured with all-MiniLM-L6-v2 (benches/README.md, "Memory keys
    /// by meaning"): the same memory scored 0.80-0.91, different ones up to 0.69
    /// (`标日学习` / `英语学习`, Chinese texts share many characters). Default 0.78.
    pub near_duplicate_meaning: f64,
    /// The same when one key and title are in Chinese, Japanese or Korean characters and the
    /// other's are not (`标日学习` / `standard_japanese`): the model was trained on English, so
    /// across scripts only the words both texts share (names, numbers) count, and its cosines
    /// run low. Measured: the same memory 0.47-0.56, different ones at most 0.39. Default 0.45.
    pub near_duplicate_meaning_across_scripts: f64,
    /// Time-to-live of memories per category.
    pub memory_ttls: MemoryTtls,
    /// Proactive recall: every context's latest request is searched for in the persona's whole
    /// history, and the best messages the context does not already show go in a recalled block
    /// of its injection. Default true.
    pub proactive: bool,
    /// The most tokens the recalled block takes, within the room the budget has left. Default
    /// 1,000.
    pub proactive_tokens: u32,
    /// The most messages the block shows. Default 12.
    pub proactive_hits: usize,
    /// A message enters the block when its cosine similarity to the request is at least this
    /// ... Default 0.45 (calibrated on the evaluation set: benches/README.md, "The context").
    pub proactive_min_similarity: f64,
    /// ... or when its keywords come this near to holding every word of the request once (1
    /// is all of them). Default 0.5.
    pub proactive_min_keyword_match: f64,
    /// Secrets masked in what strata derives from messages (summaries, memories, the recalled
    /// block): the common formats always, plus these patterns (regular expressions). The
    /// verbatim messages keep what was said. Default none.
    pub secret_patterns: Secrets,
    /// Consolidation never rewrites a memory blindly: an update from a summary's facts that
    /// drops more than this share of the memory's words, without saying the old content stopped
    /// being true (`supersede`), is not applied but kept as a proposal for the user. Default 0.5.
    pub max_dropped_share: f64,
}

impl Default for RecallConfig {
    fn default() -> RecallConfig {
        RecallConfig {
            embed_assets: None,
            default_limit: 10,
            max_limit: 50,
            embed_batch_size: 32,
            embed_max_chunks: 8,
            embed_tool_chunks: 1,
            embed_round_size: 256,
            embed_threads: 0,
            embed_spinning: false,
            embed_provider: EmbedProvider::Local,
            embed_endpoint: EndpointSettings::default(),
            embed_model: crate::embed::DEFAULT_MODEL.to_owned(),
            semantic_weight: 0.3,
            keyword_weight: 0.7,
            time_weight: 0.2,
            speaker_weight: 0.3,
            expansion_weight: 0.2,
            neighbour_weight: 0.2,
            min_similarity: 0.0,
            search_candidates: 50,
            quantized_candidates: 3_200,
            view_neighbours: 3,
            view_page_chars: 8_000,
            expand_page_size: 20,
            excerpt_chars: 600,
            history_bodies: 8,
            history_max_roots: 200,
            history_recent_messages: 6,
            near_duplicate_edits: 2,
            near_duplicate_similarity: 0.8,
            near_duplicate_meaning: 0.78,
            near_duplicate_meaning_across_scripts: 0.45,
            memory_ttls: MemoryTtls::default(),
            proactive: true,
            proactive_tokens: 1_000,
            proactive_hits: 12,
            proactive_min_similarity: 0.45,
            proactive_min_keyword_match: 0.5,
            secret_patterns: Secrets::default(),
            max_dropped_share: 0.5,
        }
    }
}

/// The longest memory time-to-live, about 1,000 years: longer ones are "never".
const MAX_TTL_DAYS: u32 = 365_000;

/// A [`RecallConfig`] whose rules hold: what the tools ([`crate::ToolContext`]) and the
/// embedding worker ([`crate::EmbedWorker`]) run on. It is made only by validating
/// ([`RecallSettings::new`]) and only read afterwards, so the rules are checked once, where the
/// settings are read, like the compactor's `CompactorSettings`.
#[derive(Clone, Debug, PartialEq)]
pub struct RecallSettings(RecallConfig);

impl RecallSettings {
    /// `config` once it passed [`RecallConfig::validate`].
    pub fn new(config: RecallConfig) -> crate::Result<RecallSettings> {
        config.validate()?;
        Ok(RecallSettings(config))
    }
}

impl Default for RecallSettings {
    /// The defaults, which hold every rule (`the_defaults_are_valid`).
    fn default() -> RecallSettings {
        RecallSettings(RecallConfig::default())
    }
}

impl std::ops::Deref for RecallSettings {
    type Target = RecallConfig;

    fn deref(&self) -> &RecallConfig {
        &self.0
    }
}

impl RecallConfig {
    /// Checks every rule of the settings; the error names the first setting that breaks one.
    pub fn validate(&self) -> crate::Result<()> {
        let invalid = |field: &str, rule: &str| {
            Err(crate::Error::Config { field: field.to_owned(), rule: rule.to_owned() })
        };
        for (field, value) in [
            ("semantic_weight", self.semantic_weight),
            ("keyword_weight", self.keyword_weight),
            ("time_weight", self.time_weight),
            ("speaker_weight", self.speaker_weight),
            ("expansion_weight", self.expansion_weight),
            ("neighbour_weight", self.neighbour_weight),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return invalid(field, "must be a number of zero or more");
            }
        }
        if let Err(err) = crate::embed::model_spec(&self.embed_model) {
            return invalid("embed_model", &format!("is not usable: {err}"));
        }
        for (field, value) in [
            ("min_similarity", self.min_similarity),
            ("near_duplicate_similarity", self.near_duplicate_similarity),
            ("near_duplicate_meaning", self.near_duplicate_meaning),
            ("near_duplicate_meaning_across_scripts", self.near_duplicate_meaning_across_scripts),
            ("proactive_min_similarity", self.proactive_min_similarity),
        ] {
            if !(-1.0..=1.0).contains(&value) {
                return invalid(field, "must be a cosine similarity between -1 and 1");
            }
        }
        if !(0.0..=1.0).contains(&self.max_dropped_share) {
            return invalid("max_dropped_share", "must be a share between 0 and 1");
        }
        if !(self.proactive_min_keyword_match.is_finite() && self.proactive_min_keyword_match >= 0.0) {
            return invalid("proactive_min_keyword_match", "must be a number of zero or more");
        }
        if self.proactive && self.proactive_hits == 0 {
            return invalid("proactive_hits", "must be at least 1 (or set proactive = false)");
        }
        for (field, chunks) in
            [("embed_max_chunks", self.embed_max_chunks), ("embed_tool_chunks", self.embed_tool_chunks)]
        {
            if !(1..=strata_seam::embeddings::MAX_CHUNKS).contains(&chunks) {
                return invalid(field, "must be between 1 and 32");
            }
        }
        let endpoint = &self.embed_endpoint;
        if endpoint.base_url.trim().is_empty() || endpoint.model.trim().is_empty() {
            return invalid("embed_endpoint", "base_url and model must not be empty");
        }
        if !(8..=8192).contains(&endpoint.dimensions) || !endpoint.dimensions.is_multiple_of(8) {
            return invalid("embed_endpoint.dimensions", "must be a multiple of 8 from 8 to 8192");
        }
        if endpoint.batch_size == 0 {
            return invalid("embed_endpoint.batch_size", "must be at least 1");
        }
        if self.default_limit == 0 || self.max_limit == 0 || self.embed_batch_size == 0 {
            return invalid("default_limit, max_limit and embed_batch_size", "must be at least 1");
        }
        for (category, ttl) in [
            ("user_preferences", self.memory_ttls.user_preferences),
            ("progress", self.memory_ttls.progress),
            ("memo", self.memory_ttls.memo),
        ] {
            if matches!(ttl, Ttl::Days(days) if days > MAX_TTL_DAYS) {
                return invalid(
                    &format!("memory_ttls.{category}"),
                    &format!("is at most {MAX_TTL_DAYS} days (or \"never\")"),
                );
            }
        }
        Ok(())
    }

    /// The embedding assets directory this config names, or the default one.
    pub fn assets_dir(&self) -> PathBuf {
        self.embed_assets.clone().unwrap_or_else(crate::embed::default_assets_dir)
    }

    /// How vector searches scan: exact, or a 1-bit first pass then exact re-scoring.
    pub fn vector_scan(&self) -> Scan {
        match self.quantized_candidates {
            0 => Scan::Exact,
            candidates => Scan::Quantized { candidates },
        }
    }

    /// A requested limit, at most `max_limit`; the default when none is given. A limit of 0 is
    /// an error rather than a silent 1: a model that asks for nothing has made a mistake it
    /// should hear about.
    pub fn limit(&self, requested: Option<u32>) -> crate::Result<usize> {
        match requested {
            Some(0) => Err(crate::Error::invalid(
                "limit",
                format!("must be at least 1 (at most {})", self.max_limit),
            )),
            requested => {
                Ok(requested.map_or(self.default_limit, |n| n as usize).clamp(1, self.max_limit.max(1)))
            }
        }
    }
}

/// Where vectors come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbedProvider {
    /// The local model (`embed_model`), run by ONNX Runtime in this process.
    #[default]
    Local,
    /// An OpenAI-compatible `/v1/embeddings` endpoint (`embed_endpoint`): OpenAI, Ollama, vLLM,
    /// text-embeddings-inference, llama.cpp server. Recall holds no HTTP client: the host
    /// implements [`crate::EmbeddingEndpoint`] (the `strata` crate does) and builds the embedder
    /// with [`crate::Embedder::remote`].
    Openai,
}

/// An OpenAI-compatible embeddings endpoint. Its vectors are stored under the model id
/// `openai:<model>`, so a database embedded by another model (or the local one) is embedded
/// again rather than mixed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointSettings {
    /// The API's base URL; requests go to `<base_url>/embeddings`. Default
    /// `http://localhost:11434/v1` (Ollama).
    pub base_url: String,
    /// The model the server runs. Default `nomic-embed-text`.
    pub model: String,
    /// The size of its vectors, checked on every answer (a multiple of 8). Default 768.
    pub dimensions: usize,
    /// Texts per request. Default 64.
    pub batch_size: usize,
    /// The environment variable holding the API key (else `OPENAI_API_KEY`; none is sent when
    /// both are unset). Default `STRATA_EMBEDDINGS_API_KEY`.
    pub api_key_env: String,
}

impl Default for EndpointSettings {
    fn default() -> EndpointSettings {
        EndpointSettings {
            base_url: "http://localhost:11434/v1".into(),
            model: "nomic-embed-text".into(),
            dimensions: 768,
            batch_size: 64,
            api_key_env: "STRATA_EMBEDDINGS_API_KEY".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RecallConfig, RecallSettings, Ttl};

    #[test]
    fn the_defaults_are_valid() {
        RecallConfig::default().validate().unwrap();
        assert_eq!(*RecallSettings::default(), RecallConfig::default());
    }

    #[test]
    fn a_broken_rule_names_its_setting() {
        let config = RecallConfig { semantic_weight: f64::NAN, ..RecallConfig::default() };
        let err = RecallSettings::new(config).unwrap_err().to_string();
        assert_eq!(err, "invalid configuration: recall.semantic_weight must be a number of zero or more");
        let mut config = RecallConfig::default();
        config.memory_ttls.progress = Ttl::Days(u32::MAX);
        let err = RecallSettings::new(config).unwrap_err().to_string();
        assert!(err.contains("recall.memory_ttls.progress"), "{err}");
    }
}
