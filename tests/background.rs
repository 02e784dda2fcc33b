//! `[summarizer] background`: prepare_context never waits for a slow summarizer.

use std::time::{Duration, Instant};

use serde_json::json;
use strata::{ChatMessage, Config, Engine, SummarizerKind};
use strata_compactor::Outcome;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::util::Strata;

/// How long the summarizer server takes per call.
const SLOW: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_context_does_not_wait_for_a_slow_summarizer() {
    let server = MockServer::start().await;
    let arguments = json!({"headline": "The early turns.", "body": "Timeline:\n- the early turns happened"});
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "save_summary", "arguments": arguments.to_string()}}]}}]}))
                .set_delay(SLOW),
        )
        .mount(&server)
        .await;
    let strata = Strata::new();
    let mut config = Config::default();
    config.summarizer.kind = SummarizerKind::Openai;
    config.summarizer.base_url = server.uri();
    config.summarizer.background = true;
    config.compactor.context_window_tokens = 6_000;
    config.compactor.reserve_tokens = 1_000;
    config.compactor.scaffold_body_tokens = 1_000;
    config.compactor.max_rounds = 1;
    config.compactor.retry.timeout_ms = 60_000;
    let engine = Engine::open(strata.db(), config.clone()).unwrap();
    let session = engine.session("chat", "assistant").unwrap();
    let mut i = 0;
    while engine.compactor().context_size(session.id()).await.unwrap() < 4_500 {
        session
            .append(ChatMessage::user(format!("Question {i}: {}", "tell me more about the plan ".repeat(20))))
            .unwrap();
        session
            .append(ChatMessage::assistant(format!("Answer {i}: {}", "here is more of the plan ".repeat(20))))
            .unwrap();
        i += 1;
    }

    let started = Instant::now();
    let prepared = session.prepare_context().await.unwrap();
    let first = started.elapsed();
    assert!(prepared.outcome.is_none(), "compaction runs in the background");
    assert!(prepared.context.tokens.total <= prepared.context.tokens.budget);
    // A second call while the first compaction runs starts no other.
    session.append(ChatMessage::user("And now?")).unwrap();
    let again = session.prepare_context().await.unwrap();
    assert!(again.context.tokens.total <= again.context.tokens.budget);
    let second = started.elapsed();
    assert!(second < SLOW, "prepare_context waited for the summarizer: {second:?}");
    eprintln!(
        "prepare_context with a {SLOW:?} summarizer in the background: {first:?}, then {:?}",
        second - first
    );

    let outcome = session.finish_compaction().await.expect("a compaction was started").unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 1, "one compaction at a time");
    let after = session.prepare_context().await.unwrap();
    assert!(
        after
            .messages()
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|t| t.contains("The early turns.")))
    );
    session.finish_compaction().await;
}
