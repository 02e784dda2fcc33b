//! Helpers: temporary stores, transcripts with tool-call groups, a fixed clock.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;
use strata_compactor::{Compactor, CompactorConfig, ExtractiveSummarizer, Outcome, Summarizer, ToolNames};
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::{Category, NewMessage, Role, SessionId};
use strata_seam::{Conversations, Forest, Memories};
use strata_store::Store;

pub struct Fixture {
    // Kept alive for the store's file.
    _dir: tempfile::TempDir,
    pub store: Store,
    pub session: SessionId,
    pub compactor: Compactor,
}

/// The fixed start of every transcript.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap()
}

pub fn fixture(config: CompactorConfig) -> Fixture {
    fixture_with(config, Arc::new(ExtractiveSummarizer::default()))
}

/// The names strata's engine gives the compactor (recall's tools), as the fixtures' default.
pub fn tool_names() -> ToolNames {
    ToolNames {
        expand_summary: "expand_summary".into(),
        view_message: "view_message".into(),
        memory_grep: "memory_grep".into(),
        memory_search: "memory_search".into(),
        memory_list: "memory_list".into(),
        view_chat_history_summary: "view_chat_history_summary".into(),
    }
}

/// A compactor over a fresh store with `config`; the texts name the tools of [`tool_names`]
/// unless `config` names its own.
pub fn fixture_with(config: CompactorConfig, summarizer: Arc<dyn Summarizer>) -> Fixture {
    let config = CompactorConfig { tool_names: config.tool_names.or_else(|| Some(tool_names())), ..config };
    fixture_as_configured(config, summarizer)
}

/// A compactor over a fresh store with `config` as it is: with `tool_names: None`, one that
/// names no tool.
pub fn fixture_as_configured(config: CompactorConfig, summarizer: Arc<dyn Summarizer>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("strata.db")).unwrap();
    let session = store.session("chat", "coder").unwrap().id;
    let compactor = Compactor::new(store.clone(), config, summarizer).unwrap();
    Fixture { _dir: dir, store, session, compactor }
}

/// One turn of a transcript: a request, optional tool calls with their results, a reply.
#[derive(Clone, Debug)]
pub struct Turn {
    pub request: String,
    pub tool_results: Vec<String>,
    pub reply: String,
    pub pin_request: bool,
}

impl Turn {
    pub fn plain(request: impl Into<String>, reply: impl Into<String>) -> Turn {
        Turn { request: request.into(), tool_results: Vec::new(), reply: reply.into(), pin_request: false }
    }
}

/// Words that give the extractive summarizer something to find.
const WORDS: &[&str] = &[
    "deploy",
    "the",
    "billing",
    "service",
    "src/main.rs",
    "port",
    "8080",
    "we",
    "decided",
    "to",
    "use",
    "postgres",
    "migration",
    "failed",
    "with",
    "error",
    "retry",
    "timeout",
    "Cargo.toml",
    "fixed",
    "it",
    "config/app.toml",
    "version",
    "1.4.2",
    "cache",
    "latency",
    "42ms",
    "and",
    "then",
    "tests",
    "pass",
];

/// `n` words picked deterministically from `seed`.
pub fn words(seed: u64, n: usize) -> String {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            WORDS[(x >> 33) as usize % WORDS.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Fixture {
    /// Appends one message at `t0 + minute` minutes, counted with the compactor's tokenizer.
    pub fn push(&self, mut message: NewMessage, minute: i64) {
        message.created_at = t0() + Duration::minutes(minute);
        self.compactor.counter().count_new(&mut message);
        self.store.append(self.session, &[message]).unwrap();
    }

    /// Appends a turn starting at minute `minute`; each message one minute after the last.
    /// Returns the minute after the turn.
    pub fn push_turn(&self, turn: &Turn, mut minute: i64) -> i64 {
        let mut request = NewMessage::text(Role::User, &turn.request);
        request.pinned = turn.pin_request;
        self.push(request, minute);
        minute += 1;
        if !turn.tool_results.is_empty() {
            let calls: Vec<serde_json::Value> = (0..turn.tool_results.len())
                .map(|i| {
                    json!({"id": format!("call_{minute}_{i}"), "type": "function",
                           "function": {"name": "bash", "arguments": json!({"cmd": format!("cargo test -p part{i}")}).to_string()}})
                })
                .collect();
            let mut call = NewMessage::text(Role::Assistant, "");
            call.tool_calls = Some(json!(calls));
            let call_minute = minute;
            self.push(call, minute);
            minute += 1;
            for (i, result) in turn.tool_results.iter().enumerate() {
                let mut message = NewMessage::text(Role::Tool, result);
                message.tool_call_id = Some(format!("call_{call_minute}_{i}"));
                message.name = Some("bash".into());
                self.push(message, minute);
                minute += 1;
            }
        }
        self.push(NewMessage::text(Role::Assistant, &turn.reply), minute);
        minute + 1
    }

    /// Compacts until the compactor reports anything but pending work.
    pub async fn compact_fully(&self) -> Outcome {
        loop {
            let outcome = self.compactor.compact(self.session).await.unwrap();
            if !matches!(outcome, Outcome::Compacted { pending: true, .. }) {
                return outcome;
            }
        }
    }

    /// Stores a user preference of the fixture's persona, as the user would.
    pub fn prefer(&self, key: &str, title: &str, content: &str) {
        let write = MemoryWrite { category: Category::UserPreferences, key, title, content };
        self.store.put_memory(Writer::User, "coder", &write).unwrap();
    }

    /// Nodes per level.
    pub fn levels(&self) -> Vec<usize> {
        let mut levels = Vec::new();
        for node in self.store.nodes(self.session).unwrap() {
            let level = node.level.index();
            if levels.len() <= level {
                levels.resize(level + 1, 0);
            }
            levels[level] += 1;
        }
        levels
    }

    /// Roots per level.
    pub fn root_levels(&self) -> Vec<usize> {
        let mut levels = Vec::new();
        for node in self.store.roots(self.session, None).unwrap() {
            let level = node.level.index();
            if levels.len() <= level {
                levels.resize(level + 1, 0);
            }
            levels[level] += 1;
        }
        levels
    }
}
