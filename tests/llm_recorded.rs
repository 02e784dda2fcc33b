//! What a real local model server does, replayed: request/response pairs recorded from
//! llama-cpp-python 0.3.36 with Qwen2.5-Coder-1.5B (`scripts/llm-rig.sh`; the files are in
//! `tests/fixtures/llama-cpp-python/`, each with the request that got the response). A wiremock
//! server answers as the real one did, so CI guards these behaviours without the real server.

use std::sync::Arc;

use serde_json::{Value, json};
use strata::llm::{ChatClient, RetryPolicy};
use strata_compactor::context::TOKENS_PER_REPLY;
use strata_compactor::{Compactor, CompactorConfig, OpenAiConfig, OpenAiSummarizer, Outcome, TokenCounter};
use strata_seam::{NewMessage, Role, SessionId};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::util::Strata;

/// One recorded exchange: the request sent, the status and body the server answered.
struct Recorded {
    request: Value,
    status: u16,
    response: Value,
}

fn recorded(name: &str) -> Recorded {
    let path = format!("{}/tests/fixtures/llama-cpp-python/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap();
    Recorded {
        request: value["request"].clone(),
        status: value["status"].as_u64().unwrap() as u16,
        response: value["response"].clone(),
    }
}

impl Recorded {
    fn reply(&self) -> ResponseTemplate {
        ResponseTemplate::new(self.status).set_body_json(self.response.clone())
    }
}

fn body(request: &Request) -> Value {
    request.body_json().expect("the client sends JSON")
}

fn final_answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": text}}]}))
}

async fn server(respond: impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(respond).mount(&server).await;
    server
}

#[tokio::test]
async fn the_recorded_validation_dump_is_shown_as_the_one_error_that_applies() {
    let null = recorded("null-content");
    let server = server(move |_| null.reply()).await;
    let messages = recorded("null-content").request["messages"].as_array().unwrap().clone();
    let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
    let client = ChatClient::with_retry(&format!("{}/v1", server.uri()), "qwen2.5-coder-1.5b", None, retry);
    let error = client.complete(&messages, &[]).await.unwrap_err();
    let strata::llm::LlmError::Status { status: 500, body, .. } = &error else { panic!("{error:?}") };
    // Of the 7 errors (one per message variant), the one about the assistant message's content.
    assert_eq!(
        body,
        "7 validation errors, the one that applies: \
         body.messages.2.ChatCompletionRequestAssistantMessage.content: Input should be a valid string"
    );
}

/// A compactor over a small meeting with the OpenAI-compatible summarizer at `server`.
fn summarizing(strata: &Strata, server: &MockServer) -> (Compactor, SessionId) {
    let retry = RetryPolicy { max_attempts: 3, initial_backoff_ms: 1, max_backoff_ms: 5, timeout_ms: 10_000 };
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 0,
        tail_turns: 1,
        leaf_min_tokens: 50,
        leaf_min_turns: 1,
        leaf_chunk_tokens: 2_000,
        max_rounds: 1,
        retry: retry.clone(),
        ..CompactorConfig::default()
    };
    let summarizer = OpenAiSummarizer::new(OpenAiConfig {
        base_url: format!("{}/v1", server.uri()),
        model: "qwen2.5-coder-1.5b".into(),
        api_key: None,
        retry,
        temperature: 0.0,
        max_output_tokens: 0,
    })
    .unwrap();
    let store = strata.backend();
    let compactor = Compactor::new(store.clone(), config, Arc::new(summarizer)).unwrap();
    let session = store.session("meeting", "team").unwrap();
    let lines = [
        "Maya: we go with logical replication to the new Postgres 16 cluster, since a dump and restore would take hours.",
        "Tomas: agreed. The cutover is on Tuesday March 10, and Thursday March 12 is the fallback date if anything slips.",
        "Maya: Tomas moves invoice-worker and payments-api to the new CNAME this week, and nightly-export gets a vault secret update.",
        "Tomas: rollback goes through reverse replication from the new cluster back to the old one, set up right after the cutover.",
    ];
    let mut messages = Vec::new();
    for line in lines.iter().cycle().take(lines.len() * 4) {
        for (role, text) in [(Role::User, (*line).to_owned()), (Role::Assistant, format!("Noted: {line}"))] {
            let mut message = NewMessage::text(role, text);
            compactor.counter().count_new(&mut message);
            messages.push(message);
        }
    }
    store.append(session.id, &messages).unwrap();
    (compactor, session.id)
}

#[tokio::test]
async fn a_cut_off_tool_call_marked_tool_calls_is_retried_as_a_new_request() {
    let cut = recorded("cut-off-tool-call");
    assert_eq!(
        cut.response["choices"][0]["finish_reason"], "tool_calls",
        "recorded: still marked tool_calls"
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(cut.reply())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST")).respond_with(recorded("summary-tool-call").reply()).mount(&server).await;
    let strata = Strata::new();
    let (compactor, session) = summarizing(&strata, &server);
    let outcome = compactor.compact(session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let retry = body(&requests[1]);
    assert_eq!(retry["temperature"], 0.2, "the retry is not the same request again");
    assert!(
        retry["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Note: Your previous reply was not a complete")
    );
}

/// llama.cpp's JSON grammar lets a sampled string hold raw line breaks (seen at temperature 0.7
/// in the measurements of shared/notes/local-llm.md; the short re-recording for this file at
/// 0.9 happened to escape them). The recorded summary call with its `\n` escapes written raw,
/// as that run returned them.
#[tokio::test]
async fn raw_newlines_inside_json_strings_are_read() {
    let mut raw = recorded("summary-tool-call");
    let arguments = &mut raw.response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"];
    let written_raw = arguments.as_str().unwrap().replace("\\n", "\n");
    assert!(serde_json::from_str::<Value>(&written_raw).is_err(), "not strict JSON");
    *arguments = Value::String(written_raw);
    let server = server(move |_: &Request| raw.reply()).await;
    let strata = Strata::new();
    let (compactor, session) = summarizing(&strata, &server);
    let outcome = compactor.compact(session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    let node = &compactor.store().nodes(session).unwrap()[0];
    assert!(node.body.contains("\n- Tomas: Cutover on Tuesday March 10"), "{}", node.body);
}

#[tokio::test]
async fn json_schema_response_format_is_never_sent() {
    let schema = recorded("json-schema-response-format");
    assert_eq!(schema.status, 500, "recorded: json_schema is answered with HTTP 500");
    let server = server(move |request: &Request| {
        let sent = body(request);
        if sent.pointer("/response_format/type") == Some(&json!("json_schema")) {
            return schema.reply();
        }
        if sent.get("tool_choice").is_some() {
            // A server without forced tool choice: strata falls back to JSON in plain content.
            return ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "tool_choice is not supported"}}));
        }
        final_answer(r#"{"headline": "Billing moves to Postgres 16 on March 10.", "body": "- logical replication\n- fallback March 12"}"#)
    })
    .await;
    let strata = Strata::new();
    let (compactor, session) = summarizing(&strata, &server);
    let outcome = compactor.compact(session).await.unwrap();
    assert!(matches!(outcome, Outcome::Compacted { nodes_created: 1, .. }), "{outcome:?}");
    for request in server.received_requests().await.unwrap() {
        assert!(body(&request).pointer("/response_format/type") != Some(&json!("json_schema")));
    }
}

/// strata's count of a request (messages, reply priming, tool definitions) against the
/// `prompt_tokens` the real server reported for the same request. The tokenizers differ
/// (cl100k_base against Qwen2.5's), so the counts agree within a margin; without the tool
/// definitions strata's count fell far short, and an 8k-window server refused the request.
#[test]
fn strata_counts_a_request_about_as_the_server_does() {
    let recorded = recorded("chat-request-with-tools");
    let server_count = recorded.response["usage"]["prompt_tokens"].as_u64().unwrap() as f64;
    let counter = TokenCounter::for_model("qwen2.5-coder-1.5b");
    let messages = recorded.request["messages"].as_array().unwrap();
    let message_tokens: u32 = messages
        .iter()
        .map(|m| {
            counter.message(
                m["content"].as_str().unwrap_or_default(),
                m.get("tool_calls"),
                m["tool_call_id"].as_str(),
                m["name"].as_str(),
            )
        })
        .sum::<u32>()
        + TOKENS_PER_REPLY;
    let tools = counter.tools(recorded.request["tools"].as_array().unwrap());
    let strata_count = f64::from(message_tokens + tools);
    let ratio = strata_count / server_count;
    println!("strata {strata_count} (tools {tools}), server {server_count}: ratio {ratio:.3}");
    assert!((0.9..=1.15).contains(&ratio), "strata {strata_count}, server {server_count}");
    let without_tools = f64::from(message_tokens) / server_count;
    assert!(without_tools < 0.8, "the tools are most of the gap: {without_tools}");
}
