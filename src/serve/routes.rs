//! Every route of `strata serve` in one table: the router matches requests against it and the
//! OpenAPI document is written from it, so the two cannot disagree.
//!
//! Routes of a persona's data live under `/v1/personas/{persona}/...`, so the persona check is
//! one rule applied before any handler runs, not a line each handler must remember.

use http::Method;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a route needs of a request's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Nothing: health, readiness and the API's description reveal no data.
    Open,
    /// Any known token.
    Token,
    /// A token that may act as the `{persona}` of the path.
    Persona,
}

/// What a route does; the handlers match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Health,
    Ready,
    OpenApi,
    Metrics,
    Tools,
    Mcp,
    Sessions,
    Session,
    Append,
    Context,
    CallTool,
    ExportSession,
    ForgetSession,
    Memories,
    Proposals,
    Accept,
    Reject,
    Stats,
    ExportPersona,
    ForgetPersona,
}

/// What a route answers with.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// JSON of this schema.
    Json(fn(&mut SchemaGenerator) -> Schema),
    /// strata's JSON Lines, one message per line (what `strata ingest` reads).
    Lines,
    /// The Prometheus text format.
    Prometheus,
    /// MCP's streamable HTTP (JSON-RPC, or a stream of server-sent events).
    Mcp,
}

/// One route.
#[derive(Debug)]
pub struct Route {
    pub method: Method,
    /// The path, `{name}` standing for one segment.
    pub pattern: &'static str,
    pub endpoint: Endpoint,
    pub access: Access,
    /// A read-only token may not call it.
    pub writes: bool,
    pub summary: &'static str,
    /// The JSON body it takes, if any.
    pub body: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// Its query parameters: name and description.
    pub query: &'static [(&'static str, &'static str)],
    pub answer: Answer,
}

/// A request's body for appending: one message, or a batch stored all or nothing.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// One message object, in any format strata reads (OpenAI chat, Anthropic, Responses
    /// items), with strata's optional `key` (idempotency), `timestamp` and `pinned`.
    pub message: Option<Value>,
    /// Several, stored in one transaction.
    pub messages: Option<Vec<Value>>,
}

/// The ids of the stored messages, in the order sent (a message whose `key` the session held
/// already gets the stored one's id).
#[derive(Debug, Serialize, JsonSchema)]
pub struct AppendReply {
    pub ids: Vec<i64>,
}

/// How to prepare the context.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    /// Also render the context in this provider format: `openai`, `anthropic` or `responses`.
    pub format: Option<String>,
    /// With `format`: send back every reasoning item, not only the provider's rule.
    #[serde(default)]
    pub keep_reasoning: bool,
}

/// The context to send: `messages` (OpenAI format) with `tokens`, what compaction did
/// (`outcome`), and with a `format` the context `rendered` in it (`system`, `messages`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContextReply {
    pub messages: Vec<Value>,
    pub tokens: Value,
    pub outcome: Option<Value>,
    pub rendered: Option<Value>,
}

/// A JSON error: its kind (`invalid_input`, `not_found`, `conflict`, `too_large`,
/// `forbidden`, `unauthorized`, `unavailable`, `unsupported`, `internal`) and what happened.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The error's kind and message.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ErrorDetail {
    pub kind: String,
    pub message: String,
}

/// Any JSON object.
fn object(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "object"})
}

/// A list of JSON objects.
fn objects(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object"}})
}

const PERSONA: &str = "/v1/personas/{persona}";
macro_rules! persona_path {
    ($tail:literal) => {
        concat!("/v1/personas/{persona}", $tail)
    };
}

/// Every route; the order is the document's.
pub static ROUTES: &[Route] = &[
    Route {
        method: Method::GET,
        pattern: "/healthz",
        endpoint: Endpoint::Health,
        access: Access::Open,
        writes: false,
        summary: "The process is up.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: "/readyz",
        endpoint: Endpoint::Ready,
        access: Access::Open,
        writes: false,
        summary: "The database answers (503 when it does not).",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: "/openapi.json",
        endpoint: Endpoint::OpenApi,
        access: Access::Open,
        writes: false,
        summary: "This document.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: "/metrics",
        endpoint: Endpoint::Metrics,
        access: Access::Token,
        writes: false,
        summary: "The server's requests and latencies, and the engine's metrics, in the Prometheus text format.",
        body: None,
        query: &[],
        answer: Answer::Prometheus,
    },
    Route {
        method: Method::GET,
        pattern: "/v1/tools",
        endpoint: Endpoint::Tools,
        access: Access::Token,
        writes: false,
        summary: "The tools the model may call, in the OpenAI function-calling format (or `format`'s).",
        body: None,
        query: &[("format", "openai (default), anthropic or responses")],
        answer: Answer::Json(objects),
    },
    Route {
        method: Method::POST,
        pattern: "/mcp",
        endpoint: Endpoint::Mcp,
        access: Access::Token,
        writes: false,
        summary: "MCP over streamable HTTP; the Strata-Session and Strata-Persona headers name the conversation.",
        body: Some(object),
        query: &[],
        answer: Answer::Mcp,
    },
    Route {
        method: Method::GET,
        pattern: "/mcp",
        endpoint: Endpoint::Mcp,
        access: Access::Token,
        writes: false,
        summary: "MCP's stream of server messages.",
        body: None,
        query: &[],
        answer: Answer::Mcp,
    },
    Route {
        method: Method::DELETE,
        pattern: "/mcp",
        endpoint: Endpoint::Mcp,
        access: Access::Token,
        writes: false,
        summary: "Ends an MCP session.",
        body: None,
        query: &[],
        answer: Answer::Mcp,
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/sessions"),
        endpoint: Endpoint::Sessions,
        access: Access::Persona,
        writes: false,
        summary: "The persona's sessions, with their message and summary counts.",
        body: None,
        query: &[],
        answer: Answer::Json(objects),
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/sessions/{session}"),
        endpoint: Endpoint::Session,
        access: Access::Persona,
        writes: false,
        summary: "One session of the persona (404 if it has none by that key).",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::DELETE,
        pattern: persona_path!("/sessions/{session}"),
        endpoint: Endpoint::ForgetSession,
        access: Access::Persona,
        writes: true,
        summary: "Forgets the session and everything derived from it.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::POST,
        pattern: persona_path!("/sessions/{session}/messages"),
        endpoint: Endpoint::Append,
        access: Access::Persona,
        writes: true,
        summary: "Appends one message or a batch (all or nothing); the session is created if new.",
        body: Some(SchemaGenerator::subschema_for::<AppendRequest>),
        query: &[],
        answer: Answer::Json(SchemaGenerator::subschema_for::<AppendReply>),
    },
    Route {
        method: Method::POST,
        pattern: persona_path!("/sessions/{session}/context"),
        endpoint: Endpoint::Context,
        access: Access::Persona,
        // Compaction is the engine's upkeep: a read-only token may ask for a context.
        writes: false,
        summary: "Compacts if needed and assembles the context to send before an LLM call.",
        body: Some(SchemaGenerator::subschema_for::<ContextRequest>),
        query: &[],
        answer: Answer::Json(SchemaGenerator::subschema_for::<ContextReply>),
    },
    Route {
        method: Method::POST,
        pattern: persona_path!("/sessions/{session}/tools/{tool}"),
        endpoint: Endpoint::CallTool,
        access: Access::Persona,
        // A writing tool (save_memory) is refused to a read-only token by name.
        writes: false,
        summary: "Runs one tool call as the persona; the body is the call's arguments. A tool's refusal is its answer ({\"error\": {kind, tool, message}}), as the model should see it.",
        body: Some(object),
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/sessions/{session}/export"),
        endpoint: Endpoint::ExportSession,
        access: Access::Persona,
        writes: false,
        summary: "The session's messages as strata's JSON Lines, every stored field.",
        body: None,
        query: &[],
        answer: Answer::Lines,
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/memories"),
        endpoint: Endpoint::Memories,
        access: Access::Persona,
        writes: false,
        summary: "The persona's memories, of one category or all.",
        body: None,
        query: &[("category", "user_preferences, progress, memo, ...")],
        answer: Answer::Json(objects),
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/proposals"),
        endpoint: Endpoint::Proposals,
        access: Access::Persona,
        writes: false,
        summary: "The preferences the summaries found, waiting for the user's yes or no.",
        body: None,
        query: &[],
        answer: Answer::Json(objects),
    },
    Route {
        method: Method::POST,
        pattern: persona_path!("/proposals/{key}/accept"),
        endpoint: Endpoint::Accept,
        access: Access::Persona,
        writes: true,
        summary: "The user accepts a proposed preference: it becomes a user_preferences memory.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::POST,
        pattern: persona_path!("/proposals/{key}/reject"),
        endpoint: Endpoint::Reject,
        access: Access::Persona,
        writes: true,
        summary: "The user rejects a proposed preference; it is deleted.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/stats"),
        endpoint: Endpoint::Stats,
        access: Access::Persona,
        writes: false,
        summary: "What the persona's sessions hold: messages, tokens, summaries, memories.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
    Route {
        method: Method::GET,
        pattern: persona_path!("/export"),
        endpoint: Endpoint::ExportPersona,
        access: Access::Persona,
        writes: false,
        summary: "Every message of the persona as strata's JSON Lines.",
        body: None,
        query: &[],
        answer: Answer::Lines,
    },
    Route {
        method: Method::DELETE,
        pattern: PERSONA,
        endpoint: Endpoint::ForgetPersona,
        access: Access::Persona,
        writes: true,
        summary: "Forgets the persona: every session, memory and proposal, and everything derived.",
        body: None,
        query: &[],
        answer: Answer::Json(object),
    },
];

/// The values of a path's `{name}` segments.
#[derive(Debug, Default)]
pub struct Params(Vec<(&'static str, String)>);

impl Params {
    /// The value of `{name}`; routes name theirs, so a handler asks only for what its pattern has.
    pub fn get(&self, name: &str) -> &str {
        self.0.iter().find(|(key, _)| *key == name).map_or("", |(_, value)| value.as_str())
    }
}

/// What a request's method and path found.
#[derive(Debug)]
pub enum Lookup {
    Found(&'static Route, Params),
    /// The path exists, with other methods.
    WrongMethod(Vec<&'static str>),
    NotFound,
    /// A segment is not valid percent-encoded UTF-8.
    BadPath(&'static str),
}

/// Finds the route of `method` and `path` (percent-decoding each segment).
pub fn lookup(method: &Method, path: &str) -> Lookup {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut methods = Vec::new();
    for route in ROUTES {
        let pattern: Vec<&str> = route.pattern.trim_start_matches('/').split('/').collect();
        if pattern.len() != segments.len() {
            continue;
        }
        let mut params = Vec::new();
        let mut matched = true;
        for (expected, given) in pattern.iter().zip(&segments) {
            if let Some(name) = expected.strip_prefix('{').and_then(|name| name.strip_suffix('}')) {
                let Some(value) = percent_decode(given) else {
                    return Lookup::BadPath("a path segment is not valid percent-encoded UTF-8");
                };
                if value.is_empty() {
                    matched = false;
                    break;
                }
                params.push((name, value));
            } else if expected != given {
                matched = false;
                break;
            }
        }
        if !matched {
            continue;
        }
        if route.method == method {
            return Lookup::Found(route, Params(params));
        }
        methods.push(route.method.as_str());
    }
    if methods.is_empty() { Lookup::NotFound } else { Lookup::WrongMethod(methods) }
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The value of `name` in a query string (`a=1&b=2`), percent-decoded (`+` is a space).
pub fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| percent_decode(&value.replace('+', " ")).unwrap_or_default())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_find_their_route_and_decode_their_segments() {
        let Lookup::Found(route, params) =
            lookup(&Method::POST, "/v1/personas/alice/sessions/chat%2F1%20a/messages")
        else {
            panic!("not found")
        };
        assert_eq!(route.endpoint, Endpoint::Append);
        assert_eq!((params.get("persona"), params.get("session")), ("alice", "chat/1 a"));
        assert!(
            matches!(lookup(&Method::GET, "/v1/personas/alice/sessions/x/messages"), Lookup::WrongMethod(m) if m == ["POST"])
        );
        assert!(matches!(lookup(&Method::GET, "/v1/nothing"), Lookup::NotFound));
        assert!(matches!(lookup(&Method::GET, "/v1/personas/%ff/stats"), Lookup::BadPath(_)));
        assert!(matches!(lookup(&Method::GET, "/v1/personas//stats"), Lookup::NotFound));
        assert_eq!(query_value(Some("a=1&category=memo"), "category").as_deref(), Some("memo"));
    }

    #[test]
    fn every_route_of_a_persona_is_checked_against_the_persona() {
        for route in ROUTES {
            assert_eq!(
                route.pattern.contains("{persona}"),
                route.access == Access::Persona,
                "{} {}",
                route.method,
                route.pattern
            );
        }
    }
}
