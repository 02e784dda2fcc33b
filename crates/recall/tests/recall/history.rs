//! view_chat_history_summary shows other threads' recent, not yet summarized messages.

use serde_json::json;

use super::util::*;
use strata_seam::Conversations;

#[test]
fn another_threads_recent_messages_are_visible_before_any_summary() {
    let fx = fixture();
    let here = fx.store.session("support-chat", "assistant").unwrap();
    let there = fx.store.session("release-thread", "assistant").unwrap();
    let elsewhere = fx.store.session("private", "someone-else").unwrap();
    append_texts(&fx.store, &here, "2026-03-02T10:00:00Z", &["Hi, when does the release ship?"]);
    let texts: Vec<String> = (0..10).map(|i| format!("release chatter {i}")).collect();
    let mut texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    texts.push("Decision: v2.3 ships Friday.");
    append_texts(&fx.store, &there, "2026-03-01T09:00:00Z", &texts);
    append_texts(&fx.store, &elsewhere, "2026-03-01T09:00:00Z", &["v9 ships never"]);

    let answer = ok(&ctx(&fx.store, &here), "view_chat_history_summary", json!({}));
    let recent = answer["recent"].as_array().unwrap();
    let release =
        recent.iter().find(|r| r["session"] == "release-thread").expect("the other thread is listed");
    assert_eq!(release["uncompacted_messages"], 11);
    let messages = release["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6, "bounded by history_recent_messages");
    assert!(unfence(messages[5]["content"].as_str().unwrap()).contains("v2.3 ships Friday"));
    assert!(!answer.to_string().contains("v9 ships never"), "another persona's thread leaked");
}
