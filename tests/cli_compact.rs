//! `strata compact`, `strata context` and `strata tree` end to end, on a generated transcript.

use strata_synth::{self as synth, TranscriptSpec};

use crate::util::Strata;

/// A generated week of pair programming as JSON Lines (about `messages` messages).
fn transcript_jsonl(messages: usize) -> String {
    synth::generate(&TranscriptSpec { min_messages: messages, min_chars: 0, ..TranscriptSpec::default() })
        .to_jsonl()
}

fn ingested(messages: usize) -> Strata {
    let strata = Strata::new();
    let file = strata.file("week.jsonl", &transcript_jsonl(messages));
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "week", "--persona", "coder"]).success();
    strata
}

#[test]
fn compact_then_context_fits_the_window_and_tree_reaches_every_message() {
    let strata = ingested(400);
    let window = "12000";
    let compacted = strata.run(&["compact", "--session", "week", "--window", window, "--json"]).json();
    assert!(compacted["nodes_created"].as_u64().unwrap() > 4, "{compacted}");
    let before = compacted["tokens_before"].as_u64().unwrap();
    let after = compacted["tokens_after"].as_u64().unwrap();
    assert!(after < before, "{compacted}");
    assert_eq!(compacted["last_outcome"]["pending"], false, "compacted until done: {compacted}");
    let levels = compacted["nodes_per_level"].as_array().unwrap();
    assert!(levels.len() >= 2 && levels[1].as_u64().unwrap() >= 1, "levels 0 and 1 present: {compacted}");

    // Compacting again finds nothing to do.
    let again = strata.run(&["compact", "--session", "week", "--window", window]).success();
    assert!(again.contains("nothing to compact") && again.contains("below threshold"), "{again}");

    let context = strata.run(&["context", "--session", "week", "--window", window, "--json"]).json();
    let tokens = &context["tokens"];
    assert!(tokens["total"].as_u64().unwrap() <= tokens["budget"].as_u64().unwrap(), "{tokens}");
    let parts: Vec<&str> =
        context["entries"].as_array().unwrap().iter().map(|e| e["part"].as_str().unwrap()).collect();
    assert_eq!(parts.first(), Some(&"head"));
    assert!(
        parts.contains(&"scaffold") && parts.contains(&"acknowledgement") && parts.contains(&"tail"),
        "{parts:?}"
    );
    let sum: u64 = ["head", "scaffold", "acknowledgement", "recent", "buffer", "tail", "reply_priming"]
        .iter()
        .map(|part| tokens[part].as_u64().unwrap())
        .sum();
    assert_eq!(sum, tokens["total"].as_u64().unwrap(), "the parts add up");
    let messages = context["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"].is_string() && m.get("content").is_some()));

    let text = strata.run(&["context", "--session", "week", "--window", window]).success();
    assert!(
        text.contains("── Scaffold · user") && text.contains("[Summary of the earlier conversation]"),
        "{text}"
    );
    assert!(text.contains("total") && text.contains(&format!("of {}", tokens["budget"])), "{text}");

    // The tree names every node, and its Level-0 ranges plus the uncompacted seqs cover every message.
    let tree = strata.run(&["tree", "--session", "week"]).success();
    assert!(tree.lines().any(|l| l.trim_start().starts_with("- #") && l.contains(" L1 ")), "{tree}");
    let nodes = strata.run(&["tree", "--session", "week", "--json"]).json();
    let total = strata.run(&["stats", "--json"]).json()["messages"].as_u64().unwrap();
    let covered: i64 = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["level"] == 0)
        .map(|n| n["last_seq"].as_i64().unwrap() - n["first_seq"].as_i64().unwrap() + 1)
        .sum();
    let uncompacted = total as i64 - covered;
    assert!(
        tree.starts_with(&format!(
            "session week (persona coder): {total} messages, {uncompacted} uncompacted"
        )),
        "{tree}"
    );
}

#[test]
fn unknown_sessions_and_bad_flags_fail_cleanly() {
    let strata = ingested(20);
    let err = strata.run(&["compact", "--session", "nope"]).failure();
    assert!(err.contains("no session \"nope\""), "{err}");
    let err = strata.run(&["context", "--session", "week", "--now", "yesterday"]).failure();
    assert!(err.contains("RFC 3339"), "{err}");
    let err = strata.run(&["context", "--session", "week", "--window", "100"]).failure();
    assert!(err.contains("context_window_tokens") || err.contains("reserve_tokens"), "{err}");
    let config = strata.file("bad.toml", "[compactor]\ncontext_windw_tokens = 5\n");
    let err = strata.run(&["context", "--session", "week", "--config", config.to_str().unwrap()]).failure();
    assert!(err.contains("context_windw_tokens"), "{err}");
}

#[test]
fn compact_exits_non_zero_with_one_line_when_the_summarizer_is_down() {
    let strata = ingested(200);
    // Nothing listens on port 9 of the loopback: every attempt fails fast with a refused connection.
    let config = strata.file(
        "fast.toml",
        "[compactor]\ncontext_window_tokens = 16000\n[compactor.retry]\nmax_attempts = 1\ntimeout_ms = 2000\n",
    );
    let out = strata
        .run(&[
            "compact",
            "--session",
            "week",
            "--config",
            config.to_str().unwrap(),
            "--summarizer",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--once",
        ])
        .failure();
    assert!(
        out.starts_with("error: compaction stopped before writing a node: the summarizer is down (1 consecutive failures): request to the summarizer failed"),
        "{out}"
    );
    assert_eq!(strata.run(&["stats", "--json"]).json()["compacted_messages"], 0);
}

/// The compactor issue's acceptance run, from the command line: a synthetic transcript of more
/// than 200,000 tokens, compacted with the extractive summarizer, gives a context inside a 32k
/// window with levels 0 and 1 present and every message reachable through the tree.
#[test]
fn synth_ingest_compact_context_fits_a_32k_window() {
    let strata = Strata::new();
    let file = strata.dir().join("week.jsonl");
    strata.run(&["synth", "--messages", "1300", "--out", file.to_str().unwrap()]).success();
    let ingested = strata.run(&["ingest", file.to_str().unwrap(), "--session", "week", "--json"]).json();
    let tokens = ingested["tokens"].as_u64().unwrap();
    assert!(tokens > 200_000, "{tokens}");

    let compacted = strata.run(&["compact", "--session", "week", "--json"]).json();
    let levels = compacted["nodes_per_level"].as_array().unwrap();
    assert!(levels.len() >= 2 && levels[1].as_u64().unwrap() > 0, "levels 0 and 1: {compacted}");

    let context = strata.run(&["context", "--session", "week", "--json"]).json();
    let total = context["tokens"]["total"].as_u64().unwrap();
    // A 32k window less the 4k reserve and the tool definitions every request carries.
    let tools = context["tokens"]["tools"].as_u64().unwrap();
    assert!(tools > 500, "the tool definitions are counted: {tools}");
    assert_eq!(context["tokens"]["budget"].as_u64().unwrap(), 28_000 - tools);
    assert!(total <= 28_000 - tools, "{total}");
    // After a compaction the context fills its budget with the newest turns again (issue 26),
    // so it is the window's size: a tenth of this conversation, not less.
    assert!(total * 2 > 28_000 - tools, "the context uses its budget: {total}");
    assert!(total * 8 < tokens, "the context is a small fraction of the conversation: {total} of {tokens}");

    // Every message is reachable: uncompacted, or covered by a Level-0 node of the tree.
    let tree = strata.run(&["tree", "--session", "week", "--json"]).json();
    let nodes = tree["nodes"].as_array().unwrap();
    let stats = strata.run(&["stats", "--json"]).json();
    let covered: u64 = nodes
        .iter()
        .filter(|n| n["level"] == 0)
        .map(|n| n["last_seq"].as_u64().unwrap() - n["first_seq"].as_u64().unwrap() + 1)
        .sum();
    assert_eq!(covered, stats["compacted_messages"].as_u64().unwrap());
}

/// Regression: a tool call whose result was never stored (the process died in between) must
/// not reach the provider unanswered, which would fail every later request.
#[test]
fn a_tool_call_without_a_stored_result_is_answered_in_the_context() {
    let strata = Strata::new();
    let lines = [
        serde_json::json!({"role": "user", "content": "check both files"}),
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}),
        serde_json::json!({"role": "tool", "content": "first file", "tool_call_id": "c1"}),
        serde_json::json!({"role": "assistant", "content": "ok", "tool_calls": []}),
        serde_json::json!({"role": "user", "content": "and now?"}),
    ];
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    let file = strata.file("crashed.jsonl", &text);
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "s"]).success();
    let context = strata.run(&["context", "--session", "s", "--json"]).json();
    let messages = context["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "assistant", "user"], "{messages:?}");
    assert_eq!(messages[2]["tool_call_id"], "c1");
    assert_eq!(messages[3]["tool_call_id"], "c2");
    assert!(messages[3]["content"].as_str().unwrap().contains("no result was stored"));
    assert!(messages[4].get("tool_calls").is_none(), "an empty tool_calls array is not replayed");
    // The stored conversation is untouched.
    assert_eq!(strata.run(&["stats", "--json"]).json()["messages"], 5);
}

/// Regression: an expired user preference (older than `[recall.memory_ttls]`) was invisible to
/// the tools but still injected into every request.
#[test]
fn expired_preferences_are_not_injected() {
    let strata = Strata::new();
    let file = strata.file("chat.jsonl", "{\"role\":\"user\",\"content\":\"hello\"}\n");
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "s", "--persona", "p"]).success();
    for (key, text) in [("editor", "use vim"), ("shell", "use fish")] {
        strata.run(&["memory", "set", "user_preferences", key, text, "--persona", "p"]).success();
    }
    strata.execute("UPDATE agent_memories SET updated_at = updated_at - 200 * 86400 WHERE key = 'editor'");
    let context = strata.run(&["context", "--session", "s", "--json"]).json();
    let request =
        context["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(request.contains("use fish") && !request.contains("use vim"), "{request}");
    let never = strata
        .command()
        .args(["context", "--session", "s", "--json"])
        .env("STRATA_RECALL_MEMORY_TTLS_USER_PREFERENCES", "\"never\"")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&never.stdout).contains("use vim"), "with no expiry it is injected");
}
