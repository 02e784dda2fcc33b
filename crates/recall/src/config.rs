//! [`RecallConfig`]: every knob of the recall tools, with documented defaults.

use std::path::PathBuf;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use strata_store::{Category, Scan};

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
    /// Directory holding `onnxruntime/` and `all-MiniLM-L6-v2-int8/` (see
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
    /// another model is re-embedded by the next `strata embed`. Default `all-MiniLM-L6-v2`.
    pub embed_model: String,
    /// Weight of the semantic score in `memory_search`'s fusion (each side's scores are first
    /// scaled to 0..=1 over its candidates). Fitted on the evaluation set, where weights from
    /// 0.2 to 0.4 are within 2 points of the best; see benches/README.md. Default 0.3.
    pub semantic_weight: f64,
    /// Weight of the keyword (bm25) score in `memory_search`'s fusion. Default 0.7.
    pub keyword_weight: f64,
    /// Semantic candidates less similar than this (cosine) to the query stay out of fusion.
    /// Default 0.0.
    pub min_similarity: f64,
    /// Candidates each side (semantic, keyword) contributes to fusion, before the limit.
    /// Default 50.
    pub search_candidates: usize,
    /// Chunks the 1-bit first pass of a vector search keeps for exact re-scoring; 0 scans the
    /// float vectors exactly (sqlite-vec). Default 3,200: at 1,000,000 vectors they hold 98.5%
    /// of the exact 10 nearest (400 held 79%) and the pass takes 52 ms against 869 ms for the
    /// exact scan; a persona of fewer chunks is re-scored whole, which is exact
    /// (benches/README.md, "Search at a million vectors").
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
    /// Two keys whose embeddings (words separated by spaces) have at least this cosine
    /// similarity are near-duplicates even when spelled differently (`user_timezone` /
    /// `time_zone_of_the_user`: 0.885). Measured with all-MiniLM-L6-v2: `staging_port` /
    /// `production_port` is 0.752 and must stay apart. Default 0.78.
    pub near_duplicate_meaning: f64,
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
            memory_ttls: MemoryTtls::default(),
            proactive: true,
            proactive_tokens: 1_000,
            proactive_hits: 12,
            proactive_min_similarity: 0.45,
            proactive_min_keyword_match: 0.5,
        }
    }
}

impl RecallConfig {
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

/// Time-to-live per memory category, counted from a memory's last write.
///
/// The decision (DESIGN leaves it open): a category is *user data* or *system data* by who
/// writes it. `user_preferences` is written by the user and is about the user: user data,
/// kept 90 days after its last write unless rewritten. `progress` and `memo` are written by the
/// agent to run its own work: system data, kept until deleted. Expired memories are invisible
/// to every tool at once and removed by `strata memory purge`.
///
/// In TOML each value is a number of days or `"never"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryTtls {
    /// User data. Default 90 days.
    pub user_preferences: Ttl,
    /// System data. Default never.
    pub progress: Ttl,
    /// System data. Default never.
    pub memo: Ttl,
}

impl Default for MemoryTtls {
    fn default() -> MemoryTtls {
        MemoryTtls { user_preferences: Ttl::Days(90), progress: Ttl::Never, memo: Ttl::Never }
    }
}

impl MemoryTtls {
    /// The time-to-live of one category.
    pub fn get(&self, category: Category) -> Ttl {
        match category {
            Category::UserPreferences => self.user_preferences,
            Category::Progress => self.progress,
            Category::Memo => self.memo,
        }
    }

    /// Memories of `category` last written before this instant are expired; `None` if the
    /// category never expires.
    pub fn cutoff(&self, category: Category, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.get(category) {
            Ttl::Never => None,
            Ttl::Days(days) => Some(now - Duration::days(i64::from(days))),
        }
    }

    /// Whether a memory of `category` written at `updated_at` is expired at `now`.
    pub fn is_expired(&self, category: Category, updated_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        self.cutoff(category, now).is_some_and(|cutoff| updated_at < cutoff)
    }
}

/// How long a memory lives after its last write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Forever.
    Never,
    /// This many days.
    Days(u32),
}

impl Serialize for Ttl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ttl::Never => serializer.serialize_str("never"),
            Ttl::Days(days) => serializer.serialize_u32(*days),
        }
    }
}

impl<'de> Deserialize<'de> for Ttl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ttl, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Days(u32),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Days(days) => Ok(Ttl::Days(days)),
            Raw::Word(word) if word == "never" => Ok(Ttl::Never),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "memory ttl must be a number of days or \"never\", not {word:?}"
            ))),
        }
    }
}
