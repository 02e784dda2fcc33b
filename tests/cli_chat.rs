//! `strata chat` against a local HTTP server that plays an OpenAI-compatible model (the loop
//! itself is tested beside it, in `src/chat/tests.rs`).

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use strata_seam::transfer::ExportScope;

use crate::util::Strata;

/// The fact the model has to recall; it lives only in an older session of the persona.
const PLANTED: &str = "The staging database password rotates every 42 days; ask Priya in #infra.";

/// A chat-completions answer carrying `message`.
fn completion(message: Value) -> ResponseTemplate {
    let finish = if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }))
}

/// An assistant message that calls one tool.
fn tool_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
    ]})
}

fn messages(request: &Request) -> Vec<Value> {
    let body: Value = request.body_json().expect("the client sends JSON");
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// The model of the main scenario: asked a question, it greps strata's memory; given the
/// tool's answer, it replies with the first snippet it got back, so the printed answer can
/// only contain the planted fact if the tool really found it.
fn grep_then_answer(request: &Request) -> ResponseTemplate {
    let messages = messages(request);
    let last = messages.last().cloned().unwrap_or_default();
    if last["role"] != "tool" {
        return completion(tool_call("call_1", "memory_grep", json!({"query": "password"})));
    }
    let result: Value =
        last["content"].as_str().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let hits = result["results"].as_array().cloned().unwrap_or_default();
    let snippets: Vec<String> =
        hits.iter().filter_map(|hit| hit["snippet"].as_str()).map(|s| s.replace(['«', '»'], "")).collect();
    completion(json!({"role": "assistant", "content": format!("From my notes: {}", snippets.join(" | "))}))
}

async fn llm(respond: fn(&Request) -> ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(respond).mount(&server).await;
    server
}

/// (role, content, tool_calls, tool_call_id) of every message of `session`, in order, read
/// through the seam so the tests run on either backend.
fn stored(strata: &Strata, session: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    strata
        .backend()
        .export_messages(ExportScope::Session(session))
        .unwrap()
        .into_iter()
        .map(|stored| {
            let m = stored.message;
            (
                m.role.as_str().to_owned(),
                m.content,
                m.tool_calls.map(|calls| calls.to_string()),
                m.tool_call_id,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strata_chat_runs_memory_grep_for_real_and_prints_the_answer() {
    let strata = Strata::new();
    let history = [
        json!({"role": "user", "content": "Anything I should know about staging?"}),
        json!({"role": "assistant", "content": PLANTED}),
    ];
    let lines: String = history.iter().map(|line| format!("{line}\n")).collect();
    let file = strata.file("history.jsonl", &lines);
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "last-week", "--persona", "coder"]).success();
    let server = llm(grep_then_answer).await;

    let mut child = strata
        .command()
        .args(["chat", "--base-url", &format!("{}/v1", server.uri()), "--model", "gpt-4o-mini"])
        .args(["--session", "today", "--persona", "coder", "--no-embed"])
        .env("OPENAI_API_KEY", "test-key")
        .env_remove("STRATA_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"How often do the staging credentials change?\n").unwrap();
    // The binary runs on its own; waiting for it blocks this thread only, and the model
    // server answers from tokio's workers.
    let output = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("From my notes:") && stdout.contains("rotates every 42 days"), "{stdout}");
    assert!(stderr.contains("[tool] memory_grep"), "{stderr}");

    // The tool ran against the database: its stored answer holds the ingested message.
    let messages = stored(&strata, "today");
    let tool: Vec<_> = messages.iter().filter(|m| m.0 == "tool").collect();
    assert_eq!(tool.len(), 1, "{messages:?}");
    assert_eq!(tool[0].3.as_deref(), Some("call_1"));
    assert!(tool[0].1.contains("Priya"), "{}", tool[0].1);
    assert_eq!(messages.last().unwrap().0, "assistant");

    // The second request carried that answer back to the model, with the key from the env.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].headers.get("authorization").unwrap(), "Bearer test-key");
    let sent = messages_of(&requests[1], "tool");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["tool_call_id"], "call_1");
    assert!(sent[0]["content"].as_str().unwrap().contains("42 days"), "{}", sent[0]);

    // With --json, each turn is one JSON line holding the answer and the tool calls.
    let mut child = strata
        .command()
        .args(["--json", "chat", "--base-url", &format!("{}/v1", server.uri())])
        .args(["--session", "today", "--no-embed"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"And who do I ask?\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let turn: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(turn["tool_calls"][0]["name"], "memory_grep", "{turn}");
    assert_eq!(turn["requests"], 2, "{turn}");
    assert!(turn["text"].as_str().unwrap().contains("Priya"), "{turn}");
    // The session began with the system message when it was new, and only then.
    let messages = stored(&strata, "today");
    assert_eq!(messages[0].0, "system");
    assert_eq!(messages.iter().filter(|m| m.0 == "system").count(), 1, "{messages:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strata_chat_reports_a_failing_model_and_goes_on() {
    let strata = Strata::new();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("model crashed"))
        .mount(&server)
        .await;
    let mut child = strata
        .command()
        .args(["chat", "--base-url", &format!("{}/v1", server.uri()), "--session", "s", "--no-embed"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n\n/exit\nnever sent\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("the model did not answer") && stderr.contains("model crashed"), "{stderr}");
    assert!(stderr.contains("1 of 1 turns failed"), "{stderr}");
    // The new session begins with strata chat's system message, then the question; the blank
    // line is skipped and nothing after /exit is read. The one turn's request was retried as
    // the summarizer's are (a 500 is transient).
    let messages = stored(&strata, "s");
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0].0, "system");
    assert!(messages[0].1.starts_with("You are a helpful assistant with a long-term memory"), "{messages:?}");
    assert_eq!((messages[1].0.as_str(), messages[1].1.as_str()), ("user", "hello"));
    let attempts = strata::llm::RetryPolicy::default().max_attempts as usize;
    assert_eq!(server.received_requests().await.unwrap().len(), attempts);
}

fn messages_of(request: &Request, role: &str) -> Vec<Value> {
    messages(request).into_iter().filter(|m| m["role"] == role).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strata_chat_sends_the_key_of_the_configured_variable() {
    let strata = Strata::new();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(wiremock::matchers::header("authorization", "Bearer sk-from-my-variable"))
        .respond_with(completion(json!({"role": "assistant", "content": "Hello."})))
        .mount(&server)
        .await;
    let mut child = strata
        .command()
        .args(["chat", "--base-url", &format!("{}/v1", server.uri()), "--session", "s", "--no-embed"])
        .env("STRATA_SUMMARIZER_API_KEY_ENV", "MY_MODEL_KEY")
        .env("MY_MODEL_KEY", "sk-from-my-variable")
        .env("STRATA_API_KEY", "sk-not-this-one")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Without the configured key the server answers 404 (no mock matches) and the turn fails.
    assert!(output.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "Hello.");
}

/// A turn's usage: the server's numbers beside strata's counts, shown on standard error and
/// recorded for `strata stats`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strata_chat_shows_and_records_each_turns_usage() {
    let strata = Strata::new();
    let server = llm(|_: &Request| {
        ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Hello there."}}],
            "usage": {"prompt_tokens": 901, "completion_tokens": 12, "total_tokens": 913}
        }))
    })
    .await;
    let mut child = strata
        .command()
        .args(["chat", "--base-url", &format!("{}/v1", server.uri()), "--model", "usage-model"])
        .args(["--session", "s", "--no-embed"])
        .env("OPENAI_API_KEY", "test-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Hi!\n").unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("[usage] 1 request: server 901 prompt + 12 completion tokens"), "{stderr}");
    let stats = strata.run(&["--json", "stats"]).json();
    let usage = stats["llm_usage"].as_array().unwrap();
    assert_eq!(usage.len(), 1, "{stats}");
    assert_eq!(usage[0]["purpose"], "chat");
    assert_eq!(usage[0]["model"], "usage-model");
    assert_eq!((usage[0]["calls"].as_u64(), usage[0]["prompt_tokens"].as_u64()), (Some(1), Some(901)));
    let counted = usage[0]["counted_prompt_tokens"].as_u64().unwrap();
    assert!(counted > 0 && usage[0]["counted_completion_tokens"].as_u64().unwrap() > 0, "{stats}");
    assert!(strata.run(&["stats"]).success().contains("llm "), "the text form shows it too");
}
