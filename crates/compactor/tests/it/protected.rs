//! Protected content is bounded: no single message of the head or of a crashed turn can make
//! a session's context impossible for good (issue 28, points 2 and 3).

use std::time::Instant;

use serde_json::json;
use strata_compactor::CompactorConfig;
use strata_compactor::context::Part;
use strata_seam::{NewMessage, Role};

use super::util::*;

/// The window: 32,000 tokens less the reserve and the tools, 26,175 in the report.
fn config() -> CompactorConfig {
    CompactorConfig { context_window_tokens: 30_175, reserve_tokens: 4_000, ..CompactorConfig::default() }
}

/// A tool call message with `n` calls, ids `call_0..`.
fn calls(n: usize, arguments: &str) -> NewMessage {
    let calls: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": "read_file", "arguments": arguments}})
        })
        .collect();
    let mut message = NewMessage::text(Role::Assistant, "");
    message.tool_calls = Some(json!(calls));
    message
}

fn result(id: &str, text: String) -> NewMessage {
    let mut message = NewMessage::text(Role::Tool, text);
    message.tool_call_id = Some(id.to_owned());
    message
}

#[tokio::test]
async fn a_large_first_turn_tool_result_is_folded_and_the_session_assembles() {
    let fx = fixture(config());
    // user, assistant tool call, a 200,000-token tool result: no system message, so the head
    // of 2 ended inside the first turn's tool group and was grown over the result.
    fx.push(NewMessage::text(Role::User, "read the whole build log"), 0);
    fx.push(calls(1, "{\"path\": \"build.log\"}"), 1);
    fx.push(result("call_0", words(1, 130_000)), 2);
    fx.push(NewMessage::text(Role::Assistant, "The build failed at the migration step."), 3);
    let mut minute = 4;
    for i in 0..12 {
        minute = fx.push_turn(&Turn::plain(words(i, 60), words(i + 100, 80)), minute);
    }
    let budget = fx.compactor.config().budget();
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    assert!(context.tokens.total <= budget, "{:?}", context.tokens);
    fx.compact_fully().await;
    let messages = fx.store.all_messages(fx.session).unwrap();
    assert!(messages[2].summary_id.is_some(), "the large result is folded like any other");
    assert!(messages[0].summary_id.is_none(), "the head stays");
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    assert!(context.tokens.total <= budget, "{:?}", context.tokens);
    assert_eq!(context.entries[0].part, Part::Head);
    assert_eq!(
        context.entries.iter().filter(|e| e.part == Part::Head).count(),
        1,
        "the head ends before the call"
    );
}

#[tokio::test]
async fn a_huge_message_in_the_head_is_stubbed_rather_than_failing_every_context() {
    let fx = fixture(config());
    fx.push(NewMessage::text(Role::System, words(2, 60_000)), 0);
    let mut minute = 1;
    for i in 0..3 {
        minute = fx.push_turn(&Turn::plain(words(i, 60), words(i + 100, 80)), minute);
    }
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    assert!(context.tokens.total <= fx.compactor.config().budget(), "{:?}", context.tokens);
    assert!(context.entries[0].abridged && context.entries[0].part == Part::Head);
    assert!(context.messages[0]["content"].as_str().unwrap().contains("view_message"));
}

/// The crash of the issue: 25 parallel calls of about 1,700 tokens stored, then the process
/// died before any result; the placeholders made every later context fail.
#[tokio::test]
async fn placeholders_of_a_crashed_turn_cost_their_own_tokens() {
    let fx = fixture(config());
    let mut minute = fx.push_turn(&Turn::plain("hello", "hi"), 0);
    fx.push(NewMessage::text(Role::User, "read every file"), minute);
    fx.push(calls(25, &json!({"path": words(3, 40)}).to_string()), minute + 1);
    minute += 2;
    for i in 0..3 {
        minute = fx.push_turn(&Turn::plain(words(i, 30), words(i + 50, 30)), minute);
    }
    let calls_message = &fx.store.all_messages(fx.session).unwrap()[3];
    assert!(calls_message.token_count > 1_000, "{}", calls_message.token_count);
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    let placeholders: Vec<u32> = context
        .messages
        .iter()
        .zip(&context.entries)
        .filter(|(m, _)| m["content"].as_str().is_some_and(|c| c.contains("no result was stored")))
        .map(|(_, e)| e.tokens)
        .collect();
    assert_eq!(placeholders.len(), 25);
    assert!(placeholders.iter().all(|&t| t < 60), "each costs its own tokens: {placeholders:?}");
    assert!(context.tokens.total <= fx.compactor.config().budget());
}

#[tokio::test]
async fn ten_thousand_parallel_calls_without_results_assemble() {
    let fx = fixture(CompactorConfig { context_window_tokens: 2_000_000, ..CompactorConfig::default() });
    fx.push(NewMessage::text(Role::User, "read every file"), 0);
    fx.push(calls(10_000, "{}"), 1);
    fx.push(NewMessage::text(Role::User, "and now?"), 2);
    let started = Instant::now();
    let context = fx.compactor.assemble(fx.session, t0()).await.unwrap();
    // Not asserted (shared machines); benches/README.md has the figures.
    eprintln!("10,000 parallel calls without results assembled in {:?}", started.elapsed());
    assert_eq!(context.messages.len(), 3 + 10_000);
    let stored: u32 = fx.store.all_messages(fx.session).unwrap().iter().map(|m| m.token_count).sum();
    // Linear: the placeholders together cost a few tens of tokens each, not 10,000 times the
    // message holding the calls.
    assert!(context.tokens.total < stored + 10_000 * 40, "{:?}", context.tokens);
}
