//! The chat loop against a local HTTP server that plays an OpenAI-compatible model: wiremock
//! answering as scripted, or as a real local server did (the recordings of
//! `tests/fixtures/llama-cpp-python/`, made with `scripts/llm-rig.sh`). `tests/cli_chat.rs`
//! runs the same loop through `strata chat`.

use std::time::Duration;

use serde_json::{Value, json};
use strata::llm::{ChatClient, LlmError};
use strata::{ChatMessage, Config, Engine, EngineSession};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use super::{ChatError, ChatLoop};

/// A database in a temporary directory, removed when dropped.
struct Db(tempfile::TempDir);

impl Db {
    fn new() -> Db {
        Db(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> std::path::PathBuf {
        self.0.path().join("strata.db")
    }
}

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

/// A model that never stops calling tools.
fn always_calls_tools(request: &Request) -> ResponseTemplate {
    let round = messages(request).iter().filter(|m| m["role"] == "tool").count();
    completion(tool_call(&format!("call_{round}"), "memory_grep", json!({"query": "password"})))
}

async fn llm(respond: impl Fn(&Request) -> ResponseTemplate + Send + Sync + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST")).and(path("/v1/chat/completions")).respond_with(respond).mount(&server).await;
    server
}

fn client(server: &MockServer) -> ChatClient {
    ChatClient::new(
        &format!("{}/v1", server.uri()),
        "gpt-4o-mini",
        Some("test-key".into()),
        Duration::from_secs(30),
    )
}

/// An engine whose persona `coder` remembers the planted fact from an older session.
fn engine_with_history(db: &Db) -> Engine {
    let engine = Engine::open(db.path(), Config::default()).unwrap();
    let old = engine.session("last-week", "coder").unwrap();
    old.append(ChatMessage::user("Anything I should know about staging?")).unwrap();
    old.append(ChatMessage::assistant(PLANTED)).unwrap();
    engine
}

/// (role, content, tool_calls, tool_call_id) of every message of `session`, in order.
fn stored(db: &Db, session: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    let db = rusqlite::Connection::open(db.path()).unwrap();
    let mut statement = db
        .prepare(
            "SELECT m.role, m.content, m.tool_calls, m.tool_call_id FROM messages m
             JOIN sessions s ON s.id = m.session_id WHERE s.key = ?1 ORDER BY m.seq",
        )
        .unwrap();
    statement
        .query_map([session], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// One recorded exchange: the status and body the server answered (the file holds the
/// request too).
struct Recorded {
    status: u16,
    response: Value,
}

fn recorded(name: &str) -> Recorded {
    let path = format!("{}/tests/fixtures/llama-cpp-python/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let value: Value = serde_json::from_str(&text).unwrap();
    Recorded { status: value["status"].as_u64().unwrap() as u16, response: value["response"].clone() }
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

/// An engine whose persona remembers the gateway rate limit in an older session, and a session
/// whose history holds a tool-call-only assistant message.
fn engine_with_a_tool_call_in_history(db: &Db) -> (Engine, EngineSession) {
    let engine = Engine::open(db.path(), Config::default()).unwrap();
    let old = engine.session("last-week", "team").unwrap();
    old.append(ChatMessage::user("Where did we leave the gateway?")).unwrap();
    old.append(ChatMessage::assistant("Priya set the gateway rate limit to 250 requests per second."))
        .unwrap();
    let today = engine.session("today", "team").unwrap();
    today.append(ChatMessage::user("Any notes on the cutover?")).unwrap();
    let call = json!([{"id": "call_0", "type": "function", "function": {"name": "memory_grep", "arguments": "{\"query\": \"cutover\"}"}}]);
    today
        .append(ChatMessage { tool_calls: Some(call), content: None, ..ChatMessage::assistant("") })
        .unwrap();
    today.append(ChatMessage::tool("call_0", "memory_grep", r#"{"count": 0, "results": []}"#)).unwrap();
    today.append(ChatMessage::assistant("Nothing about the cutover yet.")).unwrap();
    (engine, today)
}

/// The recorded server: HTTP 500 for an assistant message with `"content": null`, its text
/// reply (tools ignored) without `tool_choice`, and the call it writes as text with it.
fn as_the_server_does(request: &Request) -> ResponseTemplate {
    let sent = body(request);
    let messages = sent["messages"].as_array().unwrap();
    if messages.iter().any(|m| m["role"] == "assistant" && m["content"].is_null()) {
        return recorded("null-content").reply();
    }
    if messages.last().unwrap()["role"] == "tool" {
        let result = messages.last().unwrap()["content"].as_str().unwrap().to_owned();
        return final_answer(&format!("The memory says: {result}"));
    }
    if sent.get("tools").is_some() && sent.get("tool_choice").is_none() {
        return recorded("tools-without-tool-choice").reply();
    }
    recorded("tool-choice-auto").reply()
}

/// A client of the recorded server's model, with no key (a local server wants none).
fn recorded_client(server: &MockServer) -> ChatClient {
    ChatClient::new(&format!("{}/v1", server.uri()), "qwen2.5-coder-1.5b", None, Duration::from_secs(30))
}

#[tokio::test]
async fn loop_runs_tools_feeds_results_back_and_records_the_calls() {
    let db = Db::new();
    let engine = engine_with_history(&db);
    let server = llm(grep_then_answer).await;
    let session = engine.session("today", "coder").unwrap();

    let mut seen = Vec::new();
    let turn = ChatLoop::new(&engine, client(&server))
        .turn(&session, "How often do the staging credentials change?", |call| seen.push(call.name.clone()))
        .await
        .unwrap();

    assert!(turn.text.contains("rotates every 42 days"), "{}", turn.text);
    assert_eq!(turn.requests, 2);
    assert_eq!(seen, ["memory_grep"]);
    let call = &turn.tool_calls[0];
    assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "memory_grep"));
    assert!(!call.is_error(), "{}", call.result);
    assert!(call.result["count"].as_u64().unwrap() >= 1, "{}", call.result);

    // user, assistant (tool call), tool, assistant (answer): all stored, in order.
    let roles: Vec<String> = stored(&db, "today").into_iter().map(|m| m.0).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);

    let requests = server.received_requests().await.unwrap();
    let first: Value = requests[0].body_json().unwrap();
    let names: Vec<&str> =
        first["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(names.len(), strata_recall::Tool::ALL.len(), "{names:?}");
    assert!(names.contains(&"memory_grep"), "{names:?}");
    assert_eq!(requests[0].headers.get("authorization").unwrap(), "Bearer test-key");
    // What local servers need (llama.cpp's): tools offered with tool_choice, a reply cap, and
    // a tool-call-only assistant message with content "" (null made it answer 500).
    assert_eq!(first["tool_choice"], "auto");
    assert_eq!(first["max_tokens"], strata::llm::DEFAULT_MAX_TOKENS);
    let second: Value = requests[1].body_json().unwrap();
    let call = second["messages"].as_array().unwrap().iter().find(|m| m.get("tool_calls").is_some()).unwrap();
    assert_eq!(call["content"], "", "{call}");
}

#[tokio::test]
async fn bad_tool_arguments_go_back_to_the_model_as_an_error() {
    fn bad_then_answer(request: &Request) -> ResponseTemplate {
        let messages = messages(request);
        match messages.last() {
            Some(last) if last["role"] == "tool" => {
                completion(json!({"role": "assistant", "content": "That id was wrong, sorry."}))
            }
            _ => completion(tool_call("call_bad", "view_message", json!({"message_id": "not a number"}))),
        }
    }
    let db = Db::new();
    let engine = engine_with_history(&db);
    let server = llm(bad_then_answer).await;
    let session = engine.session("today", "coder").unwrap();

    let turn =
        ChatLoop::new(&engine, client(&server)).turn(&session, "Show me message abc", |_| {}).await.unwrap();
    assert_eq!(turn.text, "That id was wrong, sorry.");
    assert!(turn.tool_calls[0].is_error(), "{}", turn.tool_calls[0].result);

    let requests = server.received_requests().await.unwrap();
    let tool_message = messages(&requests[1]).into_iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_bad");
    let sent: Value = serde_json::from_str(tool_message["content"].as_str().unwrap()).unwrap();
    assert_eq!(sent["error"]["tool"], "view_message", "{sent}");
}

#[tokio::test]
async fn tool_rounds_are_bounded_and_every_stored_call_is_answered() {
    let db = Db::new();
    let engine = engine_with_history(&db);
    let server = llm(always_calls_tools).await;
    let session = engine.session("today", "coder").unwrap();

    let error = ChatLoop::new(&engine, client(&server))
        .max_tool_rounds(2)
        .turn(&session, "Loop forever", |_| {})
        .await
        .unwrap_err();
    let ChatError::ToolRoundsExceeded { limit, tool_calls } = error else { panic!("{error:?}") };
    assert_eq!(limit, 2);
    assert_eq!(tool_calls.len(), 2);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);

    // Three replies called a tool; each call has its result right after it, and the one that
    // was not run says why.
    let messages = stored(&db, "today");
    let calls: Vec<&str> = messages.iter().filter(|m| m.2.is_some()).map(|m| m.0.as_str()).collect();
    assert_eq!(calls, ["assistant"; 3]);
    for (index, message) in messages.iter().enumerate() {
        if let Some(tool_calls) = &message.2 {
            let id = serde_json::from_str::<Value>(tool_calls).unwrap()[0]["id"].as_str().unwrap().to_owned();
            let answer = &messages[index + 1];
            assert_eq!((answer.0.as_str(), answer.3.as_deref()), ("tool", Some(id.as_str())));
        }
    }
    assert!(messages.last().unwrap().1.contains("tool_rounds_exceeded"), "{:?}", messages.last());

    // The stored conversation is well formed: the next turn goes through.
    let server = llm(grep_then_answer).await;
    let turn = ChatLoop::new(&engine, client(&server)).turn(&session, "Try again", |_| {}).await.unwrap();
    assert!(turn.text.contains("42 days"), "{}", turn.text);
}

#[tokio::test]
async fn a_failing_endpoint_is_a_typed_error() {
    let db = Db::new();
    let engine = engine_with_history(&db);
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_string("overloaded"))
        .mount(&server)
        .await;
    let session = engine.session("today", "coder").unwrap();

    let error = ChatLoop::new(&engine, client(&server)).turn(&session, "Hello?", |_| {}).await.unwrap_err();
    let ChatError::Llm(LlmError::Status { status, body, .. }) = &error else { panic!("{error:?}") };
    assert_eq!((*status, body.as_str()), (503, "overloaded"));
    // The question is kept: nothing the user typed is lost.
    assert_eq!(stored(&db, "today").len(), 1);
}

#[tokio::test]
async fn a_session_with_a_tool_call_in_history_works_and_a_call_written_as_text_runs() {
    let null = recorded("null-content");
    assert_eq!(null.status, 500, "recorded: null content is refused with HTTP 500");
    let db = Db::new();
    let (engine, today) = engine_with_a_tool_call_in_history(&db);
    let server = llm(as_the_server_does).await;
    let turn = ChatLoop::new(&engine, recorded_client(&server))
        .turn(&today, "What is the gateway rate limit? Search the memory with memory_grep.", |_| {})
        .await
        .unwrap();
    // The recorded reply to `tool_choice: "auto"` writes the call as text: it ran all the same.
    let text_call = recorded("tool-choice-auto");
    assert!(text_call.response["choices"][0]["message"]["tool_calls"].is_null(), "recorded as text");
    assert_eq!(turn.tool_calls.len(), 1, "{turn:?}");
    assert_eq!(turn.tool_calls[0].name, "memory_grep");
    assert!(turn.text.contains("250"), "{}", turn.text);
    let requests = server.received_requests().await.unwrap();
    for request in &requests {
        let sent = body(request);
        assert_eq!(sent["tool_choice"], "auto");
        assert!(sent["messages"].as_array().unwrap().iter().all(|m| !m["content"].is_null()), "{sent}");
    }
}

#[tokio::test]
async fn without_text_call_recognition_the_call_is_printed_as_the_answer() {
    let db = Db::new();
    let (engine, today) = engine_with_a_tool_call_in_history(&db);
    let server = llm(as_the_server_does).await;
    let turn = ChatLoop::new(&engine, recorded_client(&server).with_text_tool_calls(false))
        .turn(&today, "What is the gateway rate limit?", |_| {})
        .await
        .unwrap();
    assert!(turn.tool_calls.is_empty());
    let recorded_text = recorded("tool-choice-auto").response["choices"][0]["message"]["content"].clone();
    assert_eq!(turn.text, recorded_text.as_str().unwrap().trim_end());
}
