//! The OpenAI-compatible summarizer against a real HTTP server on 127.0.0.1 (wiremock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use strata_compactor::summarize::RAW_ARCHIVE;
use strata_compactor::{CompactorConfig, OpenAiConfig, OpenAiSummarizer, Outcome};
use strata_llm::RetryPolicy;
use strata_seam::Category;
use strata_seam::memories::{MemoryWrite, Writer};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::util::{Fixture, Turn, fixture_with, words};
use strata_seam::{Conversations, Forest, Maintenance, Memories};

const MODEL: &str = "test-model";

fn retry(timeout_ms: u64) -> RetryPolicy {
    RetryPolicy { max_attempts: 3, initial_backoff_ms: 10, max_backoff_ms: 5_000, timeout_ms }
}

/// A session with enough history for exactly one Level-0 node per compaction call.
fn setup(server: &MockServer, timeout_ms: u64, failures_before_raw_archive: u32) -> Fixture {
    setup_with(
        server,
        timeout_ms,
        failures_before_raw_archive,
        "",
        CompactorConfig::default().known_memory_tokens,
    )
}

/// [`setup`], with `first_words` at the start of the first request and the summaries shown
/// `known_memory_tokens` of the persona's memories.
fn setup_with(
    server: &MockServer,
    timeout_ms: u64,
    failures_before_raw_archive: u32,
    first_words: &str,
    known_memory_tokens: u32,
) -> Fixture {
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 0,
        tail_turns: 1,
        leaf_min_tokens: 100,
        leaf_min_turns: 1,
        leaf_chunk_tokens: 400,
        max_rounds: 1,
        failures_before_raw_archive,
        known_memory_tokens,
        retry: retry(timeout_ms),
        ..CompactorConfig::default()
    };
    let summarizer = OpenAiSummarizer::new(OpenAiConfig {
        base_url: server.uri(),
        model: MODEL.into(),
        api_key: Some("sk-test".into()),
        retry: config.retry.clone(),
        temperature: 0.0,
        max_output_tokens: 0,
    })
    .unwrap();
    let fx = fixture_with(config, Arc::new(summarizer));
    let mut minute = 0;
    for i in 0..4 {
        let first = if i == 0 { first_words } else { "" };
        let turn = Turn::plain(
            format!("Request {i}: {first}{}", words(i, 120)),
            format!("Reply {i}: {}", words(i + 50, 120)),
        );
        minute = fx.push_turn(&turn, minute);
    }
    fx
}

fn tool_reply(headline: &str, body: &str) -> ResponseTemplate {
    let arguments = json!({"headline": headline, "body": body}).to_string();
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "save_summary", "arguments": arguments}}]}}]
    }))
}

fn content_reply(content: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]
    }))
}

fn completions() -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(path("/chat/completions"))
}

fn forced_tool_choice() -> wiremock::matchers::BodyPartialJsonMatcher {
    body_partial_json(json!({"tool_choice": {"type": "function", "function": {"name": "save_summary"}}}))
}

fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

#[tokio::test]
async fn a_good_tool_call_reply_is_stored_under_the_model_name() {
    let server = MockServer::start().await;
    completions()
        .and(header("authorization", "Bearer sk-test"))
        .and(forced_tool_choice())
        .respond_with(tool_reply("The user asked for four things.", "Timeline:\n- request 0 answered"))
        .mount(&server)
        .await;
    let fx = setup(&server, 5_000, 3);
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, raw_archived: 0, .. }), "{outcome:?}");
    let nodes = fx.store.nodes(fx.session).unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].summarizer, MODEL);
    assert_eq!(nodes[0].headline, "The user asked for four things.");
    assert_eq!(nodes[0].body, "Timeline:\n- request 0 answered");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let sent = body(&requests[0]);
    assert_eq!(sent["model"], MODEL);
    assert_eq!(sent["tools"][0]["function"]["name"], "save_summary");
    assert!(sent["messages"][1]["content"].as_str().unwrap().contains("Request 0:"));
}

#[tokio::test]
async fn a_server_rejecting_forced_tool_choice_is_asked_for_json_content() {
    let server = MockServer::start().await;
    completions()
        .and(forced_tool_choice())
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_json(json!({"error": {"message": "tool_choice is not supported by this model"}})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    completions()
        .respond_with(content_reply(
            "Sure! ```json\n{\"headline\": \"Plain JSON headline.\", \"body\": \"Decisions:\\n- use JSON\"}\n```",
        ))
        .mount(&server)
        .await;
    let fx = setup(&server, 5_000, 3);
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    assert_eq!(fx.store.nodes(fx.session).unwrap()[0].headline, "Plain JSON headline.");
    // The refusal is remembered: the next summary goes straight to JSON mode.
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    let requests = server.received_requests().await.unwrap();
    let forced: Vec<bool> = requests.iter().map(|r| body(r).get("tool_choice").is_some()).collect();
    assert_eq!(forced, vec![true, false, false]);
    assert!(body(&requests[1])["messages"][0]["content"].as_str().unwrap().contains("JSON object"));
}

#[tokio::test]
async fn malformed_json_is_retried_then_archived_then_resummarized() {
    let server = MockServer::start().await;
    let broken = ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "save_summary", "arguments": "{\"headline\": \"unterminated"}}]}}]
    }));
    let guard = completions().respond_with(broken).mount_as_scoped(&server).await;
    let fx = setup(&server, 5_000, 2);

    // First failure (after 3 attempts): nothing stored, typed outcome.
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    match &outcome {
        Outcome::SummarizerDown { nodes_created: 0, consecutive_failures: 1, error } => {
            assert!(error.contains("not a valid summary"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 3, "malformed output is retried");
    assert!(fx.store.nodes(fx.session).unwrap().is_empty());
    assert!(fx.store.all_messages(fx.session).unwrap().iter().all(|m| m.summary_id.is_none()));

    // Second consecutive failure: a flagged raw archive keeps the context inside the window.
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, raw_archived: 1, .. }), "{outcome:?}");
    let archived = fx.store.nodes(fx.session).unwrap().remove(0);
    assert_eq!(archived.summarizer, RAW_ARCHIVE);
    assert!(archived.headline.starts_with("[raw archive]"), "{}", archived.headline);
    assert!(fx.store.covered_messages(archived.id).unwrap().len() >= 2, "the messages stay reachable");
    drop(guard);

    // The summarizer is back: the next call summarizes new turns and re-summarizes the archive.
    completions().respond_with(tool_reply("A real summary.", "Timeline:\n- real")).mount(&server).await;
    let mut resummarized = 0;
    for _ in 0..4 {
        if let Outcome::Compacted { resummarized: n, .. } = fx.compactor.compact(fx.session).await.unwrap() {
            resummarized += n;
        }
    }
    assert_eq!(resummarized, 1);
    let node = fx.store.node(archived.id).unwrap();
    assert_eq!((node.summarizer.as_str(), node.headline.as_str()), (MODEL, "A real summary."));
    assert!(fx.store.nodes(fx.session).unwrap().iter().all(|n| n.summarizer != RAW_ARCHIVE));
    assert_eq!(fx.compactor.consecutive_failures(fx.session), 0);
}

#[tokio::test]
async fn a_429_is_retried_after_the_time_the_server_asks_for() {
    let server = MockServer::start().await;
    completions()
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    completions()
        .respond_with(tool_reply("After the rate limit.", "Timeline:\n- waited"))
        .mount(&server)
        .await;
    let fx = setup(&server, 5_000, 3);
    let start = Instant::now();
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    // The client's own backoff is 10 ms here: only Retry-After explains a one-second wait.
    assert!(start.elapsed() >= Duration::from_millis(950), "{:?}", start.elapsed());
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    assert_eq!(fx.store.nodes(fx.session).unwrap()[0].headline, "After the rate limit.");
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let server = MockServer::start().await;
    completions()
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    completions().respond_with(tool_reply("Third time lucky.", "Timeline:\n- ok")).mount(&server).await;
    let fx = setup(&server, 5_000, 3);
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    let nodes = fx.store.nodes(fx.session).unwrap();
    assert_eq!((nodes.len(), nodes[0].headline.as_str()), (1, "Third time lucky."));
}

#[tokio::test]
async fn a_hanging_server_times_out_and_nothing_is_stored() {
    let server = MockServer::start().await;
    completions()
        .respond_with(tool_reply("Too late.", "Timeline:\n- late").set_delay(Duration::from_secs(10)))
        .mount(&server)
        .await;
    let fx = setup(&server, 200, 3);
    let start = Instant::now();
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(5), "the timeout applies: {:?}", start.elapsed());
    match &outcome {
        Outcome::SummarizerDown { nodes_created: 0, error, .. } => {
            assert!(error.contains("did not answer"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received_requests().await.unwrap().len(), 3, "timeouts are retried");
    assert!(fx.store.nodes(fx.session).unwrap().is_empty());
}

#[tokio::test]
async fn an_empty_summary_is_never_stored() {
    let server = MockServer::start().await;
    completions().respond_with(tool_reply("", "")).mount(&server).await;
    let fx = setup(&server, 5_000, 3);
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    match &outcome {
        Outcome::SummarizerDown { nodes_created: 0, error, .. } => {
            assert!(error.contains("empty"), "{error}")
        }
        other => panic!("{other:?}"),
    }
    assert!(fx.store.nodes(fx.session).unwrap().is_empty());
    assert!(fx.store.all_messages(fx.session).unwrap().iter().all(|m| m.summary_id.is_none()));
}

#[tokio::test]
async fn a_summary_longer_than_its_sources_is_rejected() {
    let server = MockServer::start().await;
    completions().respond_with(tool_reply("Long.", &words(3, 900))).mount(&server).await;
    let fx = setup(&server, 5_000, 3);
    match fx.compactor.compact(fx.session).await.unwrap() {
        Outcome::SummarizerDown { error, .. } => assert!(error.contains("rejected"), "{error}"),
        other => panic!("{other:?}"),
    }
    // Retried once (summary_retries), as a different request: a note of what was wrong and a
    // temperature step, since the same request at temperature 0 gets the same reply.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2, "a rejected summary is asked for again once");
    let (first, retry) = (body(&requests[0]), body(&requests[1]));
    assert_eq!(first["temperature"], 0.0);
    assert_eq!(retry["temperature"], 0.2);
    let note = retry["messages"][1]["content"].as_str().unwrap();
    // The note says in words how long the summary was and may be, last in the request.
    let note = note.rsplit_once("Note: Your previous summary of these messages was rejected: ").unwrap().1;
    assert!(note.starts_with("it had ") && note.ends_with("as short notes in your own words.\n"), "{note}");
    let number = |after: &str| -> usize {
        note.split(after).nth(1).unwrap().split(' ').next().unwrap().parse().unwrap()
    };
    let (had, limit) = (number("it had "), number("the limit is "));
    let source_words: usize =
        fx.store.all_messages(fx.session).unwrap().iter().map(|m| m.content.split_whitespace().count()).sum();
    assert!(limit < source_words / 2 && limit < had, "under half the messages: {note}");
    assert!(fx.store.nodes(fx.session).unwrap().is_empty());
    let rejections = fx.store.stats().unwrap().rejections;
    assert_eq!(rejections.len(), 1);
    assert_eq!((rejections[0].reason.as_str(), rejections[0].count), ("oversized", 2));
}

/// `[summarizer] input_cap_tokens`: a turn far over the cap (a 120,000-character tool result)
/// reaches the model in pieces under the cap, whose summaries are then merged into one.
#[tokio::test]
async fn an_oversized_request_is_summarized_in_capped_pieces_then_merged() {
    use strata_compactor::context::Encoding;
    use strata_compactor::summarize::{Origin, SourceItem, SourceKind, SummaryRequest};
    use strata_compactor::{CappedSummarizer, Summarizer, TokenCounter};
    use strata_seam::Role;

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(tool_reply("Part of a long log.", "- rows checked"))
        .mount(&server)
        .await;
    let client = OpenAiSummarizer::new(OpenAiConfig {
        base_url: server.uri(),
        model: MODEL.into(),
        api_key: None,
        retry: retry(10_000),
        temperature: 0.0,
        max_output_tokens: 0,
    })
    .unwrap();
    let counter = TokenCounter::new(Encoding::Cl100kBase);
    let capped = CappedSummarizer::new(client, 4_000, counter.clone());
    let log: String = (0..8_000).map(|i| format!("row {i:04} checked ok; ")).collect();
    let time = chrono::Utc::now();
    let item = |reference: &str, role: Role, text: String| SourceItem {
        reference: reference.into(),
        origin: Origin::Message(role),
        name: None,
        tool: None,
        calls: Vec::new(),
        time,
        text,
    };
    let items = vec![
        item("message 1 (seq 0)", Role::User, "Check the log please.".into()),
        item("message 2 (seq 1)", Role::Tool, log.clone()),
    ];
    let source_tokens = items.iter().map(|i| counter.text(&i.text)).sum();
    assert!(source_tokens > 20_000, "{source_tokens}");
    let request = SummaryRequest {
        kind: SourceKind::Messages,
        level: strata_seam::Level::LEAF,
        persona: "p".into(),
        items,
        source_tokens,
        target_tokens: 400,
        retry: None,
        known_memories: Vec::new(),
    };
    let summary = capped.summarize(&request).await.unwrap();
    assert_eq!(summary.headline, "Part of a long log.");

    let requests = server.received_requests().await.unwrap();
    let user_text = |r: &Request| -> String {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        body["messages"][1]["content"].as_str().unwrap().to_owned()
    };
    let pieces: Vec<String> =
        requests.iter().map(user_text).filter(|t| t.contains("chat messages")).collect();
    let merges: Vec<String> = requests.iter().map(user_text).filter(|t| t.contains("summaries")).collect();
    assert!(pieces.len() >= 5, "{} pieces", pieces.len());
    assert_eq!(merges.len(), 1, "one merge of the pieces");
    for piece in &pieces {
        // The cap counts the sources; the request adds its instructions and headings.
        assert!(counter.text(piece) <= 4_000 + 200, "{} tokens", counter.text(piece));
    }
    assert!(pieces.iter().any(|p| p.contains("message 2 (seq 1), part 2 of")), "parts are named");
    // Every row of the log reached the model exactly once.
    let sent: usize = pieces.iter().map(|p| p.matches("checked ok;").count()).sum();
    assert_eq!(sent, 8_000);
    // A request under the cap goes through untouched.
    let small = SummaryRequest { items: request.items[..1].to_vec(), source_tokens: 6, ..request.clone() };
    server.reset().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(tool_reply("Asked for a check.", "- check"))
        .mount(&server)
        .await;
    capped.summarize(&small).await.unwrap();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

/// Every call is recorded with the usage the server reported beside strata's own counts: two
/// failed attempts (no usage) and the one that wrote the node.
#[tokio::test]
async fn every_call_records_the_servers_usage_beside_stratas_count() {
    let server = MockServer::start().await;
    completions()
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    let arguments = json!({"headline": "Four requests answered.", "body": "Timeline:\n- ok"}).to_string();
    completions()
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "save_summary", "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}
        })))
        .mount(&server)
        .await;
    let fx = setup(&server, 5_000, 3);
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    let days = fx.store.usage_by_day().unwrap();
    assert_eq!(days.len(), 1, "{days:?}");
    let (day, totals) = (&days[0], &days[0].totals);
    assert_eq!(
        (totals.purpose.as_str(), totals.caller.as_str(), totals.model.as_str()),
        ("summary", MODEL, MODEL)
    );
    assert_eq!((totals.calls, totals.failures), (3, 2));
    assert_eq!((totals.prompt_tokens, totals.completion_tokens), (1234, 56));
    let node = &fx.store.nodes(fx.session).unwrap()[0];
    assert_eq!(day.counted_completion_tokens, u64::from(node.token_count), "strata's count of the summary");
    assert_eq!(
        day.counted_prompt_tokens,
        3 * u64::from(node.source_token_count),
        "each attempt sent the sources"
    );
}

/// Issue 24: a summary of messages is shown the persona's memory keys and titles, so that its
/// memory updates reuse a key instead of forking a twin (`japanese_textbook_study` next to
/// `标日学习`): those the messages name first, then the newest, within `known_memory_tokens`.
#[tokio::test]
async fn a_summary_of_messages_is_shown_the_personas_memory_keys_the_named_ones_first() {
    let server = MockServer::start().await;
    completions()
        .respond_with(tool_reply("Lesson 13 of the textbook done.", "- lesson 13"))
        .mount(&server)
        .await;
    let fx = setup_with(&server, 5_000, 3, "今天学完了标日第13课，语法有点难。 ", 60);
    let persona = fx.store.session_by_id(fx.session).unwrap().persona;
    let memo = |key: &str, title: &str| {
        let write = MemoryWrite { category: Category::Memo, key, title, content: "..." };
        fx.store.put_memory(Writer::User, &persona, &write).unwrap();
    };
    // The one the messages name is the oldest; twenty newer ones are about other things.
    memo("标日学习", "标日学习进度");
    for n in 0..20 {
        memo(&format!("unrelated_note_{n:02}"), &format!("Unrelated note {n}"));
    }
    let outcome = fx.compactor.compact(fx.session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    let requests = server.received_requests().await.unwrap();
    let sent = body(&requests[0]);
    let prompt = sent["messages"][1]["content"].as_str().unwrap();
    let listed: Vec<&str> = prompt.lines().filter(|line| line.starts_with("- memo/")).collect();
    // Each with its current content: what an update would replace.
    assert_eq!(listed.first(), Some(&"- memo/标日学习: 标日学习进度 = ..."), "the named one first: {prompt}");
    assert_eq!(listed.get(1), Some(&"- memo/unrelated_note_19: Unrelated note 19 = ..."), "then the newest");
    assert!(listed.len() < 21, "within the budget: {listed:?}");
    assert!(prompt.contains("under the same category and key"), "{prompt}");
    // The whole list comes before the word limit is restated, the last thing the model reads.
    assert!(prompt.rfind("- memo/").unwrap() < prompt.rfind("Now write the summary").unwrap());
}
