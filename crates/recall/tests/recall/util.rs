//! Shared fixtures: a temporary store, the real embedder (loaded once), message builders.

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use serde_json::Value;
use strata_recall::{Embedder, RecallConfig, RecallSettings, ToolContext, call_tool, embed_backlog};
use strata_seam::{Conversations, Vectors};
use strata_seam::{NewMessage, Role, Session};
use strata_store::Store;

/// The real all-MiniLM-L6-v2, loaded once per test binary.
pub fn embedder() -> Embedder {
    static EMBEDDER: OnceLock<Embedder> = OnceLock::new();
    EMBEDDER
        .get_or_init(|| {
            Embedder::load_default().unwrap_or_else(|e| {
                panic!(
                    "these tests need the real embedding model: run scripts/fetch-embed-assets.sh (make test does): {}",
                    e.chain_message()
                )
            })
        })
        .clone()
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub store: Store,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("strata.db")).unwrap();
    Fixture { _dir: dir, store }
}

pub fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

pub fn message(role: Role, content: &str, time: DateTime<Utc>) -> NewMessage {
    let mut message = NewMessage::text(role, content);
    message.created_at = time;
    message.token_count = content.split_whitespace().count() as u32;
    message
}

/// Appends texts to a session, alternating user/assistant, one minute apart from `start`.
pub fn append_texts(store: &Store, session: &Session, start: &str, texts: &[&str]) -> Vec<i64> {
    let start = at(start);
    let messages: Vec<NewMessage> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
            message(role, text, start + chrono::Duration::minutes(i as i64))
        })
        .collect();
    store.append(session.id, &messages).unwrap().into_iter().map(|id| id.0).collect()
}

pub fn embed_all(store: &Store) {
    embed_backlog(store, &embedder(), |_| {}).unwrap();
    assert_eq!(store.backlog_count(None, None).unwrap(), 0);
}

/// A context for tool calls made from another, empty conversation of `session`'s persona: the
/// tools then search `session` whole (a call from `session` itself leaves out what its own
/// context already holds; `in_context.rs` tests that).
pub fn ctx(store: &Store, session: &Session) -> ToolContext {
    ctx_with(store, session, RecallConfig::default())
}

pub fn ctx_with(store: &Store, session: &Session, config: RecallConfig) -> ToolContext {
    ToolContext::new(store.clone(), caller(store, session), embedder(), RecallSettings::new(config).unwrap())
}

/// An empty session of `session`'s persona to call tools from.
pub fn caller(store: &Store, session: &Session) -> Session {
    store.session(&format!("{}-caller", session.key), &session.persona).unwrap()
}

/// Calls a tool and asserts the answer is not an error.
#[track_caller]
pub fn ok(ctx: &ToolContext, tool: &str, args: Value) -> Value {
    let answer = call_tool(ctx, tool, &args);
    assert!(answer.get("error").is_none(), "{tool}({args}) failed: {answer:#}");
    answer
}

/// Calls a tool and returns its error object, asserting there is one.
#[track_caller]
pub fn err(ctx: &ToolContext, tool: &str, args: Value) -> Value {
    let answer = call_tool(ctx, tool, &args);
    answer.get("error").cloned().unwrap_or_else(|| panic!("{tool}({args}) should fail: {answer:#}"))
}

/// (kind, id) of every result of a search answer.
pub fn found(answer: &Value) -> Vec<(String, i64)> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap().to_owned(), r["id"].as_i64().unwrap()))
        .collect()
}

/// Removes the data fence around a recalled text.
pub fn unfence(text: &str) -> &str {
    let start = text.find('\n').map_or(0, |i| i + 1);
    let end = text.rfind('\n').unwrap_or(text.len());
    &text[start..end.max(start)]
}
