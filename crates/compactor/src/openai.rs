//! The OpenAI-compatible chat-completions summarizer (OpenAI, Ollama, llama.cpp server, vLLM).
//!
//! It asks for the summary through a forced tool call, `save_summary{headline, body,
//! memory_updates}`, which
//! every compatible server turns into well-formed JSON. A server that rejects forced tool
//! choice (HTTP 400/422 naming `tool_choice` or `tools`) is remembered, and from then on asked
//! for a JSON object in plain content instead. Transient failures (429, 5xx, timeouts, broken
//! connections, unreadable replies) are retried with exponential backoff and jitter, honouring
//! `Retry-After`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tracing::Instrument as _;

use crate::error::SummarizeError;
use strata_llm::{ChatEndpoint, LlmError, RetryPolicy};
use strata_seam::Category;
use strata_seam::memories::{Edit, MemoryUpdate};

use crate::summarizer::{BoxFuture, MAX_MEMORY_UPDATES, SourceKind, Summarizer, Summary, SummaryRequest};
use strata_llm::{ReportedCall, UsageLog};

/// Settings of the OpenAI-compatible client.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model id, stored as the summarizer name of the nodes it writes.
    pub model: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Timeouts and retries.
    pub retry: RetryPolicy,
    /// Sampling temperature of a first attempt; each retry of the same sources adds a small
    /// step (default 0).
    pub temperature: f64,
    /// `max_tokens` of a request; 0 asks for twice the summary's target, at least 256.
    pub max_output_tokens: u32,
}

impl OpenAiConfig {
    /// Settings for `model` at `base_url`, with the API key from `STRATA_API_KEY` or
    /// `OPENAI_API_KEY` when set.
    pub fn from_env(
        base_url: impl Into<String>,
        model: impl Into<String>,
        retry: RetryPolicy,
    ) -> OpenAiConfig {
        let api_key = strata_llm::api_key("STRATA_API_KEY");
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key,
            retry,
            temperature: 0.0,
            max_output_tokens: 0,
        }
    }
}

/// The summarizer backed by an OpenAI-compatible `chat/completions` endpoint.
#[derive(Debug)]
pub struct OpenAiSummarizer {
    config: OpenAiConfig,
    endpoint: ChatEndpoint,
    /// Set once the server refused forced tool choice; later requests go straight to JSON mode.
    plain_json: AtomicBool,
    /// Every HTTP attempt, with the usage the server reported, until the compactor records it.
    usage: UsageLog,
}

const SYSTEM_PROMPT: &str = "You compress chat history for an AI agent's long-term memory. Write a short, \
     faithful summary of the material the user gives you, in your own words: merge what belongs together, drop \
     greetings, filler and repetition, and never copy a sentence of the material. Cover every decision, number, \
     name and date, each in as few words as possible. Never invent facts; keep names, \
     file paths, numbers, dates, commands and error messages exact. The headline is one sentence of at most 20 \
     words saying what happened. The body is short '- ' notes of a few words each (like '- Cache TTL cut to 5 min \
     by Ana: fixes stale prices'), under the headings 'Timeline:', 'Decisions:', 'Pitfalls:' (errors, dead ends \
     and their fixes), 'Files:' and 'Numbers:' where they apply; leave out empty headings. Keep to the word limit \
     you are given: a longer summary is rejected.";

/// What the model is told about `memory_updates`, for chat messages (merges repeat nothing:
/// their facts were taken from the messages).
const MEMORY_INSTRUCTION: &str = "Also list in memory_updates the few facts worth remembering for weeks \
     (at most 8, often none): decisions, facts about the user's world, task progress. Category 'progress' for \
     the state of a task, 'memo' for a fact or decision, 'user_preferences' only for a preference the user \
     stated about how you should work (it is proposed to the user, not stored). Each has a short snake_case \
     key, a title and content of at most 500 characters. Never list what only a tool output or a document \
     says unless a person confirmed it.";

/// What the model is told before the persona's memories (`category/key: title`, one a line):
/// without them it names each fact afresh and forks twins of memories it cannot see.
const KNOWN_MEMORIES_INSTRUCTION: &str = "Memories already saved for this persona (category/key: title = current \
     content). For news about one of them, put it in memory_updates under the same category and key with \
     \"edit\": \"update\" and its whole new content, keeping what still holds (an update that drops much of \
     the current content is not applied), or with \"edit\": \"supersede\" when the current content stopped \
     being true; use a new key (\"edit\": \"add\") only for something none of them covers:\n";

const NO_MEMORY_INSTRUCTION: &str = "Leave memory_updates empty.";

const JSON_INSTRUCTION: &str = "Reply with only a JSON object of the form {\"headline\": \"...\", \"body\": \"...\", \
     \"memory_updates\": [{\"category\": \"memo\", \"key\": \"...\", \"title\": \"...\", \"content\": \"...\"}]} and nothing else.";

/// The `save_summary` tool. The lengths in its schema stop a model that loops (servers that
/// build a grammar from the schema, as llama.cpp does, close the string there); they are loose,
/// eight characters per word of the limit, since the gate, not the schema, judges the length.
fn save_summary_tool(limit_words: usize) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "save_summary",
            "description": "Store the summary of the given chat history.",
            "parameters": {
                "type": "object",
                "properties": {
                    "headline": {"type": "string", "description": "One sentence: what happened.",
                                 "maxLength": crate::summarizer::HEADLINE_MAX_CHARS},
                    "body": {"type": "string", "maxLength": limit_words * 8,
                             "description": "Short '- ' notes in your own words under the headings Timeline, Decisions, Pitfalls, Files, Numbers."},
                    "memory_updates": {
                        "type": "array",
                        "description": "Facts worth keeping as long-term memories; often empty.",
                        "maxItems": MAX_MEMORY_UPDATES,
                        "items": {
                            "type": "object",
                            "properties": {
                                "category": {"type": "string", "enum": ["progress", "memo", "user_preferences"]},
                                "key": {"type": "string", "description": "short snake_case key"},
                                "title": {"type": "string"},
                                "content": {"type": "string", "description": "at most 500 characters"},
                                "edit": {"type": "string", "enum": ["add", "update", "supersede"],
                                         "description": "add a new key; update a saved memory with its whole new content; supersede one that stopped being true"}
                            },
                            "required": ["category", "key", "title", "content"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["headline", "body"],
                "additionalProperties": false
            }
        }
    })
}

/// The summary's limit in words: its target at the sources' own words per token, so it means
/// the same for prose, code and lists of numbers.
fn limit_words(request: &SummaryRequest) -> usize {
    let sources: Vec<String> = request.items.iter().map(|item| item.full_text().into_owned()).collect();
    crate::summarizer::words_for(request.target_tokens, &sources.join("\n"), request.source_tokens).max(8)
}

/// The sources as one user message, between two statements of the word limit (a small model
/// heeds what it read last).
fn render_sources(request: &SummaryRequest) -> String {
    let what = match request.kind {
        SourceKind::Messages => "the following chat messages",
        SourceKind::Summaries => "the following summaries of consecutive parts of a chat into one",
    };
    let source_words: usize =
        request.items.iter().map(|item| crate::summarizer::word_count(&item.full_text())).sum();
    let limit = limit_words(request);
    let mut text = format!(
        "Summarize {what} (persona {}; {} items, {source_words} words). The headline and the body together \
         must have at most {limit} words.\n\n",
        request.persona,
        request.items.len(),
    );
    for item in &request.items {
        let called: Vec<&str> = item.calls.iter().map(|call| call.name.as_str()).collect();
        let tool = match (&item.tool, called.is_empty()) {
            (Some(tool), _) => format!(" [{tool}]"),
            (None, false) => format!(" [{}]", called.join(", ")),
            (None, true) => String::new(),
        };
        let name = item.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
        text.push_str(&format!(
            "### {} · {}{}{} · {}\n{}\n\n",
            item.reference,
            item.origin.as_str(),
            name,
            tool,
            item.time.format("%Y-%m-%d %H:%M UTC"),
            item.full_text()
        ));
    }
    if request.kind == SourceKind::Messages && !request.known_memories.is_empty() {
        text.push_str(KNOWN_MEMORIES_INSTRUCTION);
        for memory in &request.known_memories {
            text.push_str("- ");
            text.push_str(&memory.line());
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str(&format!(
        "Now write the summary: at most {limit} words in all, as short notes in your own words, with no sentence \
         copied from above.\n"
    ));
    text
}

/// Temperature added per rejected summary or unreadable reply of the same sources: a retry at
/// temperature 0 would resend the identical request and get the identical reply.
const TEMPERATURE_STEP: f64 = 0.2;

/// `text` with raw control characters inside JSON strings escaped. llama.cpp's JSON grammar lets
/// a sampled string hold literal newlines, which strict JSON (and serde_json) refuses.
fn escape_raw_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let (mut out, mut in_string, mut escaped) = (String::with_capacity(text.len()), false, false);
    for c in text.chars() {
        match c {
            _ if escaped => {
                escaped = false;
                out.push(c);
            }
            '\\' if in_string => {
                escaped = true;
                out.push(c);
            }
            '"' => {
                in_string = !in_string;
                out.push(c);
            }
            '\n' if in_string => out.push_str("\\n"),
            '\r' if in_string => out.push_str("\\r"),
            '\t' if in_string => out.push_str("\\t"),
            c if in_string && c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Parses a `{headline, body}` object out of a model's text: bare, in a ``` fence, or
/// surrounded by prose. Raw line breaks inside its strings are accepted; an object cut off
/// before its end (a reply stopped at `max_tokens`) is malformed.
fn parse_summary_json(text: &str) -> Result<Summary, SummarizeError> {
    let start = text.find('{');
    let end = text.rfind('}');
    let candidate = match (start, end) {
        (Some(start), Some(end)) if start < end => &text[start..=end],
        _ => return Err(SummarizeError::Malformed("no JSON object in the reply".into())),
    };
    let value: Value = serde_json::from_str(&escape_raw_controls(candidate))
        .map_err(|e| SummarizeError::Malformed(format!("invalid JSON in the reply: {e}")))?;
    let field = |name: &str| value.get(name).and_then(Value::as_str).map(str::to_owned);
    match (field("headline"), field("body")) {
        (Some(headline), Some(body)) if !headline.trim().is_empty() && !body.trim().is_empty() => {
            Ok(Summary { headline, body, memory_updates: memory_updates(&value["memory_updates"]) })
        }
        (Some(_), Some(_)) => Err(SummarizeError::Malformed("the headline or the body is empty".into())),
        _ => Err(SummarizeError::Malformed("the JSON lacks string fields headline and body".into())),
    }
}

/// The well-formed entries of a reply's `memory_updates`; a malformed entry is dropped, never
/// the summary (the facts are a bonus, the summary is the job).
fn memory_updates(value: &Value) -> Vec<MemoryUpdate> {
    let Some(entries) = value.as_array() else { return Vec::new() };
    entries
        .iter()
        .filter_map(|entry| {
            let text = |name: &str| entry.get(name).and_then(Value::as_str).map(str::trim);
            let category = text("category")?.parse::<Category>().ok()?;
            let (key, content) = (text("key")?, text("content")?);
            let title = text("title").filter(|title| !title.is_empty()).unwrap_or(key);
            let edit = text("edit").and_then(Edit::parse);
            Some(MemoryUpdate {
                category,
                key: key.into(),
                title: title.into(),
                content: content.into(),
                edit,
            })
        })
        .take(MAX_MEMORY_UPDATES)
        .collect()
}

/// The summary in a chat-completions response: the `save_summary` call's arguments, or JSON
/// in the content when the model answered in prose. `max_tokens` is what the request allowed.
fn extract(response: &Value, max_tokens: Option<u64>) -> Result<Summary, SummarizeError> {
    let message = &response["choices"][0]["message"];
    if message.is_null() {
        return Err(SummarizeError::Malformed("the response has no choices[0].message".into()));
    }
    // llama.cpp marks a call cut off at max_tokens `tool_calls` all the same: the usage tells.
    let finish = response["choices"][0]["finish_reason"].as_str().unwrap_or_default();
    let used = response.pointer("/usage/completion_tokens").and_then(Value::as_u64);
    let cut_off = finish == "length" || (used.is_some() && used == max_tokens);
    let cut = |error: SummarizeError| match error {
        SummarizeError::Malformed(reason) if cut_off => {
            SummarizeError::Malformed(format!("cut off at max_tokens: {reason}"))
        }
        other => other,
    };
    if let Some(calls) = message["tool_calls"].as_array()
        && let Some(call) = calls.iter().find(|c| c["function"]["name"] == "save_summary").or(calls.first())
    {
        let arguments = &call["function"]["arguments"];
        // Some servers send the arguments as an object instead of a JSON string.
        let text = match arguments {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        return parse_summary_json(&text).map_err(cut);
    }
    match message["content"].as_str() {
        Some(content) if !content.trim().is_empty() => parse_summary_json(content).map_err(cut),
        _ => Err(SummarizeError::Malformed("the reply holds neither a tool call nor content".into())),
    }
}

/// True when a 400/422 body says the server does not do (forced) tool calls.
fn rejects_tool_choice(status: u16, body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    matches!(status, 400 | 422 | 501)
        && (body.contains("tool_choice") || body.contains("tool") || body.contains("function"))
}

/// One failed attempt and how long the server asked us to wait.
struct Attempt {
    error: SummarizeError,
    retry_after: Option<Duration>,
}

impl OpenAiSummarizer {
    /// A client for `config`. Fails only if the TLS backend cannot be set up.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiSummarizer, SummarizeError> {
        let endpoint = ChatEndpoint::new(&config.base_url, config.api_key.clone(), config.retry.clone())?;
        Ok(OpenAiSummarizer {
            config,
            endpoint,
            plain_json: AtomicBool::new(false),
            usage: UsageLog::default(),
        })
    }

    /// The request body. `malformed` is the reason the previous attempt's reply could not be
    /// read, if it could not: the retry says so and samples a little hotter.
    fn body(&self, request: &SummaryRequest, plain: bool, malformed: Option<&SummarizeError>) -> Value {
        let mut system = SYSTEM_PROMPT.to_owned();
        system.push(' ');
        system.push_str(match request.kind {
            SourceKind::Messages => MEMORY_INSTRUCTION,
            SourceKind::Summaries => NO_MEMORY_INSTRUCTION,
        });
        if plain {
            system.push(' ');
            system.push_str(JSON_INSTRUCTION);
        }
        let mut user = render_sources(request);
        let mut steps = 0;
        if let Some(retry) = &request.retry {
            user.push_str(&format!("Note: {}\n", retry.note));
            steps += retry.rejections;
        }
        if let Some(note) = malformed.and_then(crate::summarizer::retry_note) {
            user.push_str(&format!("Note: {note}\n"));
            steps += 1;
        }
        // Stepped up to 1 at most, or the configured temperature if that is higher.
        let base = self.config.temperature;
        let temperature = (base + f64::from(steps) * TEMPERATURE_STEP).min(base.max(1.0));
        let max_tokens = match self.config.max_output_tokens {
            0 => request.target_tokens.saturating_mul(2).max(256),
            set => set,
        };
        let mut body = json!({
            "model": self.config.model,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        });
        if !plain {
            body["tools"] = json!([save_summary_tool(limit_words(request))]);
            body["tool_choice"] = json!({"type": "function", "function": {"name": "save_summary"}});
        }
        body
    }

    /// One HTTP attempt; `malformed` is why the previous attempt's reply was unreadable.
    async fn attempt(
        &self,
        request: &SummaryRequest,
        malformed: Option<&SummarizeError>,
    ) -> Result<Summary, Attempt> {
        let plain = self.plain_json.load(Ordering::Relaxed);
        let body = self.body(request, plain, malformed);
        let max_tokens = body["max_tokens"].as_u64();
        let started = Instant::now();
        let sent = self.endpoint.attempt(&body).await;
        let model = &self.config.model;
        let value = sent.map_err(|failed| {
            self.usage.push(ReportedCall::failed(model, started.elapsed()));
            let refused = matches!(&failed.error, LlmError::Status { status, body, .. }
                if !plain && rejects_tool_choice(*status, body));
            if refused {
                tracing::info!("server rejects forced tool choice; asking for JSON content instead");
                self.plain_json.store(true, Ordering::Relaxed);
                // Not the server's fault: retry at once in JSON mode.
                return Attempt { error: failed.error.into(), retry_after: Some(Duration::ZERO) };
            }
            Attempt { error: failed.error.into(), retry_after: failed.retry_after }
        })?;
        // The call's span is `run`'s, current here.
        strata_llm::span::record_response(&tracing::Span::current(), &value);
        let summary = extract(&value, max_tokens);
        self.usage.push(ReportedCall::answered(model, &value, summary.is_ok(), started.elapsed()));
        summary.map_err(|error| Attempt { error, retry_after: None })
    }

    /// One summary, over all its attempts, in one `chat {model}` span.
    async fn run(&self, request: &SummaryRequest) -> Result<Summary, SummarizeError> {
        let span = strata_llm::span::chat_span(&self.config.model, self.endpoint.url());
        let result = self.attempts(request).instrument(span.clone()).await;
        if let Err(error) = &result {
            let error_type = match error {
                SummarizeError::Status { status, .. } => status.to_string(),
                SummarizeError::Timeout(_) => "timeout".to_owned(),
                _ => "_OTHER".to_owned(),
            };
            strata_llm::span::record_failure(&span, &error_type);
        }
        result
    }

    async fn attempts(&self, request: &SummaryRequest) -> Result<Summary, SummarizeError> {
        let policy = &self.config.retry;
        let mut attempt = 1;
        // A switch to JSON mode gets one extra attempt: it is a change of protocol, not a retry.
        let mut extra = 1;
        let mut malformed: Option<SummarizeError> = None;
        loop {
            let failed = match self.attempt(request, malformed.as_ref()).await {
                Ok(summary) => return Ok(summary),
                Err(failed) => failed,
            };
            let switched = failed.retry_after == Some(Duration::ZERO)
                && matches!(failed.error, SummarizeError::Status { status: 400 | 422 | 501, .. });
            if switched && extra > 0 {
                extra -= 1;
                continue;
            }
            if !failed.error.is_transient() || attempt >= policy.max_attempts {
                return Err(failed.error);
            }
            let wait = self.endpoint.wait(attempt, failed.retry_after);
            tracing::debug!(attempt, ?wait, error = %failed.error, "retrying the summarizer");
            tokio::time::sleep(wait).await;
            attempt += 1;
            if let SummarizeError::Malformed(_) = failed.error {
                malformed = Some(failed.error);
            }
        }
    }
}

impl Summarizer for OpenAiSummarizer {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(self.run(request))
    }

    fn usage_log(&self) -> Option<&UsageLog> {
        Some(&self.usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarizer::{Origin, SourceCall, SourceItem};
    use strata_seam::Role;

    /// The prompt shows a message's tool calls after its text and their names in its heading,
    /// and a tool result under the tool's name.
    #[test]
    fn sources_show_the_calls_a_message_makes() {
        let time = chrono::DateTime::UNIX_EPOCH;
        let call =
            |name: &str, arguments: &str| SourceCall { name: name.into(), arguments: arguments.into() };
        let asked = SourceItem {
            reference: "message 1 (seq 0)".into(),
            origin: Origin::Message(Role::Assistant),
            name: None,
            tool: None,
            calls: vec![call("read_file", "path=src/a.rs"), call("grep", "query=port")],
            time,
            text: "Let me look.".into(),
        };
        let answered = SourceItem {
            reference: "message 2 (seq 1)".into(),
            origin: Origin::Message(Role::Tool),
            tool: Some("read_file".into()),
            calls: Vec::new(),
            text: "fn main() {}".into(),
            ..asked.clone()
        };
        let request = SummaryRequest {
            kind: SourceKind::Messages,
            level: strata_seam::Level::LEAF,
            persona: "p".into(),
            items: vec![asked, answered],
            source_tokens: 40,
            target_tokens: 20,
            retry: None,
            known_memories: Vec::new(),
        };
        let text = render_sources(&request);
        assert!(
            text.contains(
                "### message 1 (seq 0) · assistant [read_file, grep] · 1970-01-01 00:00 UTC\n\
                 Let me look.\n[calls read_file: path=src/a.rs ]\n[calls grep: query=port ]\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("### message 2 (seq 1) · tool [read_file] · 1970-01-01 00:00 UTC\nfn main() {}\n"),
            "{text}"
        );
    }

    #[test]
    fn json_is_found_in_fences_and_prose() {
        let fenced = "Here you go:\n```json\n{\"headline\": \"H.\", \"body\": \"- b\"}\n```";
        assert_eq!(parse_summary_json(fenced).unwrap().headline, "H.");
        assert!(matches!(parse_summary_json("no json"), Err(SummarizeError::Malformed(_))));
        assert!(matches!(
            parse_summary_json("{\"headline\": \"\", \"body\": \"x\"}"),
            Err(SummarizeError::Malformed(_))
        ));
        assert!(matches!(parse_summary_json("{\"headline\": 1}"), Err(SummarizeError::Malformed(_))));
    }

    #[test]
    fn memory_updates_are_read_leniently_and_bounded() {
        let reply = r#"{"headline": "H.", "body": "- b", "memory_updates": [
            {"category": "memo", "key": "db_port", "title": "DB port", "content": "Postgres listens on 5433"},
            {"category": "user_preferences", "key": "tabs", "title": "", "content": "Indent with tabs"},
            {"category": "secrets", "key": "x", "title": "t", "content": "y"},
            {"key": "no_category", "content": "z"},
            "not an object"]}"#;
        let summary = parse_summary_json(reply).unwrap();
        assert_eq!(summary.memory_updates.len(), 2, "{:?}", summary.memory_updates);
        assert_eq!(summary.memory_updates[0].category, Category::Memo);
        assert_eq!(summary.memory_updates[1].category, Category::UserPreferences);
        assert_eq!(summary.memory_updates[1].title, "tabs", "an empty title falls back to the key");
        let none =
            parse_summary_json(r#"{"headline": "H.", "body": "- b", "memory_updates": "lots"}"#).unwrap();
        assert!(none.memory_updates.is_empty(), "a malformed list costs the facts, not the summary");
        let many: Vec<Value> = (0..20)
            .map(|n| json!({"category": "memo", "key": format!("k{n}"), "title": "t", "content": "c"}))
            .collect();
        let reply = json!({"headline": "H.", "body": "- b", "memory_updates": many}).to_string();
        assert_eq!(parse_summary_json(&reply).unwrap().memory_updates.len(), MAX_MEMORY_UPDATES);
    }

    #[test]
    fn raw_line_breaks_inside_strings_are_accepted() {
        let raw = "{ \"headline\": \"Moved\tthe DB.\", \"body\": \"- one\n- two\\n- three\" }";
        let summary = parse_summary_json(raw).unwrap();
        assert_eq!(summary.body, "- one\n- two\n- three");
        assert_eq!(summary.headline, "Moved\tthe DB.");
        // Outside strings, line breaks are ordinary white space and stay as they are.
        assert_eq!(escape_raw_controls("{\n\"a\": \"b\"\n}"), "{\n\"a\": \"b\"\n}");
    }

    #[test]
    fn a_call_cut_off_at_max_tokens_is_malformed_even_if_marked_tool_calls() {
        let response = json!({"choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant",
            "tool_calls": [{"function": {"name": "save_summary", "arguments": "{\"headline\": \"A\", \"body\": \"Tomas owns"}}]}}],
            "usage": {"completion_tokens": 600}});
        match extract(&response, Some(600)) {
            Err(SummarizeError::Malformed(reason)) => {
                assert!(reason.starts_with("cut off at max_tokens"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
