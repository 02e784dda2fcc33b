//! OTLP export of strata's spans (`strata::otel`, on in the binary by the `OTEL_*` variables),
//! against an in-process collector: a real local HTTP server that takes what the real exporter
//! sends (OTLP protobuf over HTTP at `/v1/traces`), decoded here with the protocol's own
//! messages. The binary shuts its exporter down before it exits, which sends every span, so
//! the spans are all there once the process has ended.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Output, Stdio};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::util::Strata;

/// The fact in the older session; the model's `memory_grep` finds it, and saves it.
const PLANTED: &str = "The staging database password rotates every 42 days; ask Priya in #infra.";
/// What the user asks in the traced turn.
const QUESTION: &str = "How often do the staging credentials change?";

/// One span as the collector got it.
#[derive(Debug)]
struct Received {
    name: String,
    kind: i32,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: BTreeMap<String, Any>,
}

impl Received {
    fn text(&self, key: &str) -> Option<&str> {
        match self.attributes.get(key) {
            Some(Any::StringValue(text)) => Some(text),
            _ => None,
        }
    }

    fn int(&self, key: &str) -> Option<i64> {
        match self.attributes.get(key) {
            Some(Any::IntValue(value)) => Some(*value),
            _ => None,
        }
    }
}

/// An OTLP/HTTP collector on 127.0.0.1 that accepts every export.
async fn collector() -> MockServer {
    let server = MockServer::start().await;
    // An empty ExportTraceServiceResponse is zero bytes of protobuf.
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200).insert_header("content-type", "application/x-protobuf"))
        .mount(&server)
        .await;
    server
}

/// The service name and every span of every export the collector received.
async fn received(collector: &MockServer) -> (Vec<String>, Vec<Received>) {
    let requests = collector.received_requests().await.expect("the collector records requests");
    let (mut services, mut spans) = (Vec::new(), Vec::new());
    for request in requests {
        assert_eq!(request.url.path(), "/v1/traces");
        let content_type = request.headers.get("content-type").map(|value| value.to_str().unwrap_or(""));
        assert_eq!(content_type, Some("application/x-protobuf"));
        let export = ExportTraceServiceRequest::decode(request.body.as_slice()).expect("OTLP protobuf");
        for resource_spans in export.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            services.extend(attributes(resource.attributes).remove("service.name").and_then(|value| {
                match value {
                    Any::StringValue(name) => Some(name),
                    _ => None,
                }
            }));
            for scope in resource_spans.scope_spans {
                spans.extend(scope.spans.into_iter().map(|span| Received {
                    name: span.name,
                    kind: span.kind,
                    span_id: span.span_id,
                    parent_span_id: span.parent_span_id,
                    attributes: attributes(span.attributes),
                }));
            }
        }
    }
    (services, spans)
}

fn attributes(list: Vec<KeyValue>) -> BTreeMap<String, Any> {
    list.into_iter().filter_map(|kv| Some((kv.key, kv.value?.value?))).collect()
}

fn named<'a>(spans: &'a [Received], name: &str) -> Vec<&'a Received> {
    spans.iter().filter(|span| span.name == name).collect()
}

/// The tool calls the model makes, one a reply, before it answers: a search, a save (its
/// text is the planted fact, which no span may carry), a read of the timeline.
fn planned_calls() -> [(&'static str, Value); 3] {
    [
        ("memory_grep", json!({"query": "password"})),
        (
            "save_memory",
            json!({"category": "memo", "key": "rotation_period", "title": "Rotation", "content": PLANTED}),
        ),
        ("view_chat_history_summary", json!({})),
    ]
}

/// A model that makes the [`planned_calls`] in order, then answers; every reply reports its
/// usage.
fn tools_then_answer(request: &Request) -> ResponseTemplate {
    let body: Value = request.body_json().expect("the client sends JSON");
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let answered = messages
        .iter()
        .rev()
        .take_while(|message| message["role"] != "user")
        .filter(|m| m["role"] == "tool")
        .count();
    let message = match planned_calls().get(answered) {
        Some((name, arguments)) => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{answered}"), "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()}}]}),
        None => json!({"role": "assistant", "content": "Every 42 days."}),
    };
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-test",
        "model": "gpt-4o-mini-2024",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 901, "completion_tokens": 12, "total_tokens": 913},
    }))
}

/// `strata chat` for one turn against `model`, exporting to `collector` unless `disabled`.
fn chat_turn(strata: &Strata, model: &MockServer, collector: &MockServer, disabled: bool) -> Output {
    let mut command = strata.command();
    command
        .args(["chat", "--base-url", &format!("{}/v1", model.uri()), "--model", "gpt-4o-mini"])
        .args(["--session", "today", "--persona", "coder", "--no-embed"])
        .env("OPENAI_API_KEY", "test-key")
        .env_remove("STRATA_API_KEY")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SERVICE_NAME")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    if disabled {
        command.env("OTEL_SDK_DISABLED", "true");
    } else {
        command.env_remove("OTEL_SDK_DISABLED");
    }
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(format!("{QUESTION}\n").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    output
}

fn with_history() -> Strata {
    let strata = Strata::new();
    let history = [
        json!({"role": "user", "content": "Anything I should know about staging?"}),
        json!({"role": "assistant", "content": PLANTED}),
    ];
    let lines: String = history.iter().map(|line| format!("{line}\n")).collect();
    let file = strata.file("history.jsonl", &lines);
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "last-week", "--persona", "coder"]).success();
    strata
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_exports_genai_spans_to_the_collector() {
    let strata = with_history();
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(tools_then_answer)
        .mount(&model)
        .await;
    let collector = collector().await;
    chat_turn(&strata, &model, &collector, false);

    let (services, spans) = received(&collector).await;
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert!(!services.is_empty() && services.iter().all(|name| name == "strata"), "{services:?}");

    // The context was prepared for the session, named as the conversation.
    let prepared = named(&spans, "prepare_context");
    assert!(!prepared.is_empty(), "{names:?}");
    assert!(prepared.iter().all(|span| span.text("gen_ai.conversation.id") == Some("today")), "{prepared:?}");

    // A model call per tool call and one for the answer, each a client span with its usage.
    let chats = named(&spans, "chat gpt-4o-mini");
    assert_eq!(chats.len(), planned_calls().len() + 1, "{names:?}");
    let model_port = i64::from(model.address().port());
    for chat in &chats {
        assert_eq!(chat.kind, SpanKind::Client as i32, "{chat:?}");
        assert_eq!(chat.text("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.text("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.text("gen_ai.request.model"), Some("gpt-4o-mini"));
        assert_eq!(chat.text("gen_ai.response.model"), Some("gpt-4o-mini-2024"));
        assert_eq!(
            (chat.int("gen_ai.usage.input_tokens"), chat.int("gen_ai.usage.output_tokens")),
            (Some(901), Some(12)),
            "{chat:?}"
        );
        assert_eq!(
            (chat.text("server.address"), chat.int("server.port")),
            (Some("127.0.0.1"), Some(model_port))
        );
    }

    // The tool call, and inside it the memory search it made, in the persona's store.
    let tools = named(&spans, "execute_tool memory_grep");
    assert_eq!(tools.len(), 1, "{names:?}");
    let tool = tools[0];
    assert_eq!(tool.text("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(tool.text("gen_ai.tool.name"), Some("memory_grep"));
    assert_eq!(tool.text("gen_ai.tool.type"), Some("function"));
    assert_eq!(tool.text("error.type"), None, "the tool answered: {tool:?}");
    let searches = named(&spans, "search_memory");
    assert_eq!(searches.len(), 1, "{names:?}");
    let search = searches[0];
    assert_eq!(search.parent_span_id, tool.span_id, "search_memory runs inside the tool call");
    assert_eq!(search.text("gen_ai.operation.name"), Some("search_memory"));
    assert_eq!(search.text("gen_ai.memory.store.id"), Some("coder"));
    assert!(search.int("gen_ai.memory.record.count").is_some_and(|count| count >= 1), "{search:?}");

    // The save is an upsert of its key in the persona's store, inside its tool call.
    let saves = named(&spans, "execute_tool save_memory");
    let upserts = named(&spans, "upsert_memory");
    assert_eq!((saves.len(), upserts.len()), (1, 1), "{names:?}");
    assert_eq!(saves[0].text("error.type"), None, "the memory was saved: {:?}", saves[0]);
    assert_eq!(upserts[0].parent_span_id, saves[0].span_id);
    assert_eq!(upserts[0].text("gen_ai.operation.name"), Some("upsert_memory"));
    assert_eq!(upserts[0].text("gen_ai.memory.store.id"), Some("coder"));
    assert_eq!(upserts[0].text("gen_ai.memory.record.id"), Some("rotation_period"));
    // A tool that is no memory operation has its execute_tool span alone.
    let timeline = named(&spans, "execute_tool view_chat_history_summary");
    assert_eq!(timeline.len(), 1, "{names:?}");
    assert_eq!(timeline[0].text("gen_ai.tool.name"), Some("view_chat_history_summary"));

    // No span carries the conversation's text: not the question, the query or what was found.
    for span in &spans {
        for (key, value) in &span.attributes {
            if let Any::StringValue(text) = value {
                for quoted in ["staging", "password", "42 days", "Priya"] {
                    assert!(!text.contains(quoted), "{} {key} = {text:?}", span.name);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otel_sdk_disabled_sends_nothing_even_with_an_endpoint() {
    let strata = with_history();
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(tools_then_answer)
        .mount(&model)
        .await;
    let collector = collector().await;
    let output = chat_turn(&strata, &model, &collector, true);
    // The turn itself ran (the model was asked twice), and not one export was made.
    assert!(String::from_utf8_lossy(&output.stdout).contains("42 days"));
    assert_eq!(model.received_requests().await.unwrap().len(), planned_calls().len() + 1);
    assert_eq!(collector.received_requests().await.unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_exports_its_spans() {
    let strata = Strata::new();
    let transcript = strata_synth::generate(&strata_synth::TranscriptSpec {
        min_messages: 400,
        min_chars: 0,
        ..strata_synth::TranscriptSpec::default()
    })
    .to_jsonl();
    let file = strata.file("week.jsonl", &transcript);
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "week", "--persona", "coder"]).success();
    let collector = collector().await;
    let output = strata
        .command()
        .args(["compact", "--session", "week", "--window", "12000", "--json"])
        .env_remove("OTEL_SDK_DISABLED")
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", format!("{}/v1/traces", collector.uri()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let compacted: Value = serde_json::from_slice(&output.stdout).unwrap();
    let created = compacted["nodes_created"].as_u64().unwrap();

    let (_, spans) = received(&collector).await;
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    assert!(!named(&spans, "compact").is_empty(), "{names:?}");
    // One summarize span per node written (a rejected summary is asked for again in the same span).
    assert_eq!(named(&spans, "summarize").len() as u64, created, "{names:?}");
}
