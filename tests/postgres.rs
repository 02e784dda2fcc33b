//! The engine and the command line on PostgreSQL (the server `make test` starts): the main
//! job runs on it as on SQLite, the engine's compaction, context and tools give the same
//! answers on both backends, and the commands only SQLite has say so and change nothing.

use serde_json::json;
use strata::{ChatMessage, Config, Engine};

#[path = "../crates/pg/tests/common/mod.rs"]
mod common;

use crate::util::Strata;

#[test]
fn the_demo_runs_on_postgresql() {
    let strata = Strata::new();
    let (url, _database) = common::scratch_database();
    let db = std::path::Path::new(&url);
    let out = strata.run_on(db, &["demo", "--messages", "260"]).success();
    for expected in [
        "[1/4] stored",
        "[2/4] compacted (extractive summarizer)",
        "[3/4] embedded",
        "[4/4] assembled the context",
        "fix        in the context verbatim? yes",
        "▸ memory_grep",
        "refused: user_preferences are read-only",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let search = out.split("▸ memory_search").nth(1).unwrap().split("▸ view_message").next().unwrap();
    assert!(search.contains("rotates every 45 days"), "{search}");
    assert!(!out.contains(":postgres@"), "the password is shown: {out}");
    // The read commands find what the demo stored, and the checks pass.
    let grep = strata.run_on(db, &["grep", "max_retries"]).success();
    assert!(grep.contains("«max_retries» = 3"), "{grep}");
    let doctor = strata.run_on(db, &["doctor"]).success();
    assert!(doctor.contains("ok  no two Level-0 nodes overlap"), "{doctor}");
    let stats = strata.run_on(db, &["--json", "stats"]).json();
    assert!(stats["messages"].as_u64().unwrap() >= 260, "{stats}");
    assert!(stats["nodes_per_level"][0].as_u64().unwrap() > 0, "{stats}");
    // A command only SQLite has is one clear error.
    let error = strata.run_on(db, &["export", "--persona", "developer", "--out", "x"]).failure();
    assert!(error.contains("needs a SQLite database"), "{error}");
    // Running the demo again is refused, not duplicated.
    let again = strata.run_on(db, &["demo", "--messages", "260"]).failure();
    assert!(again.contains("already holds the demo"), "{again}");
}

/// Folds as soon as there is a little to fold, so early turns live only in summaries.
fn folding() -> Config {
    let mut config = Config::default();
    config.compactor.trigger_ratio = 0.0;
    config.compactor.target_ratio = 0.0;
    config.compactor.leaf_min_tokens = 100;
    config.compactor.leaf_chunk_tokens = 300;
    config.compactor.tail_turns = 1;
    config.compactor.tail_tokens = 200;
    config
}

/// What one backend answered, to compare with the other's.
#[derive(Debug, PartialEq)]
struct Answers {
    nodes: Vec<(u32, i64, i64)>,
    context_tokens: u32,
    grep_hits: Vec<String>,
    viewed: String,
    expanded_sources: usize,
    saved: bool,
    refused: String,
    memories: usize,
}

fn run_engine(location: &std::path::Path) -> Answers {
    let engine = Engine::open(location, folding()).unwrap();
    let session = engine.session("chat-1", "assistant").unwrap();
    session.append(ChatMessage::user("Hello!")).unwrap();
    session.append(ChatMessage::assistant("Hello, how can I help?")).unwrap();
    session.append(ChatMessage::user("Note for later: the staging database listens on port 5433.")).unwrap();
    session.append(ChatMessage::assistant("Noted: staging's database is on port 5433.")).unwrap();
    for round in 0..6 {
        session
            .append(ChatMessage::user(format!("Round {round}: shall we rename the review meeting?")))
            .unwrap();
        session
            .append(ChatMessage::assistant(format!("Round {round}: let us keep its name for now.")))
            .unwrap();
    }
    let runtime = strata::blocking::runtime().unwrap();
    let prepared = runtime.block_on(session.prepare_context()).unwrap();
    let nodes = engine
        .store()
        .nodes(session.id())
        .unwrap()
        .into_iter()
        .map(|node| (node.level.0, node.first_seq, node.last_seq))
        .collect();
    let grep = runtime.block_on(session.call_tool("memory_grep", json!({"query": "port 5433"})));
    // Both backends number rows from 1, so the same conversation gets the same ids.
    let mut grep_hits: Vec<String> = grep["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| format!("{} {}", hit["kind"], hit["id"]))
        .collect();
    grep_hits.sort();
    let first = engine.store().messages(session.id(), 2..=2).unwrap().remove(0);
    let viewed = runtime.block_on(session.call_tool("view_message", json!({"message_id": first.id.0})));
    let node = first.summary_id.expect("the fact is folded into a summary");
    let expanded = runtime.block_on(session.call_tool("expand_summary", json!({"node_id": node.0})));
    let saved = runtime.block_on(session.call_tool(
        "save_memory",
        json!({"category": "memo", "key": "staging_port", "title": "Staging port", "content": "5433"}),
    ));
    let refused = runtime.block_on(session.call_tool(
        "save_memory",
        json!({"category": "user_preferences", "key": "tone", "title": "Tone", "content": "terse"}),
    ));
    Answers {
        nodes,
        context_tokens: prepared.context.tokens.total,
        grep_hits,
        viewed: viewed["message"]["content"].as_str().unwrap_or_default().to_owned(),
        expanded_sources: expanded["messages"].as_array().map_or(0, Vec::len),
        saved: saved.get("error").is_none(),
        refused: refused["error"]["kind"].as_str().unwrap_or_default().to_owned(),
        memories: engine.store().memories("assistant", None).unwrap().len(),
    }
}

#[test]
fn the_engine_answers_alike_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = run_engine(&dir.path().join("strata.db"));
    let (url, _database) = common::scratch_database();
    let postgres = run_engine(std::path::Path::new(&url));
    assert!(!sqlite.nodes.is_empty(), "nothing was folded: {sqlite:?}");
    assert!(sqlite.grep_hits.len() >= 2, "{sqlite:?}");
    assert!(sqlite.viewed.contains("5433"), "{sqlite:?}");
    assert!(sqlite.expanded_sources > 0 && sqlite.saved, "{sqlite:?}");
    assert_eq!(sqlite.refused, "forbidden");
    assert_eq!(sqlite, postgres);
}
