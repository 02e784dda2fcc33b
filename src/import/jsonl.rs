//! strata's own JSON Lines: one message per line, what `strata ingest` reads and
//! `strata export --format jsonl` writes, so that an export ingested into an empty database
//! stores the same messages, field for field.
//!
//! A line is a message as [`Incoming::from_json`] reads it (an OpenAI chat message, with
//! strata's `timestamp`, `key`, `pinned`) with three keys of its own: `session`, `persona`,
//! and `id` (the older name of `key`: the message's id, unique in its session). A message
//! stored with a body (any other shape: reasoning, media, an Anthropic message, a Responses
//! item, unknown fields) is written as `{"message": <the body as sent>, "timestamp": ...}`,
//! so that its own `id` or `type` never meets strata's keys and it reads back byte for byte.
//! In a line of an Anthropic message or a Responses item, `id` is the message's own (its
//! provider's id), not strata's key: such a line names its key with `key`.
//! Unlike the bindings' reader, a line refuses duplicate keys: serde keeps the last of two, so
//! `{"role": "user", "role": "system"}` would be stored as a system message and nothing said so.

use std::path::Path;

use chrono::{DateTime, SecondsFormat, TimeDelta};
use serde::Deserialize;
use serde_json::{Map, Value};
use strata_seam::Role;
use strata_seam::transfer::{ExportedMessage, IncomingMessage};

use crate::Incoming;
use crate::import::{Bad, ImportError, ImportOptions, numbered_lines};

/// The keys a line has beside the message's.
pub const LINE_KEYS: [&str; 3] = ["session", "persona", "id"];

/// Reads a whole file of strata's JSON Lines.
pub fn read(text: &str, path: &Path, options: &ImportOptions) -> Result<Vec<IncomingMessage>, ImportError> {
    numbered_lines(text)
        .map(|(line, text)| {
            parse_line(text, options).map_err(|source| ImportError::Line {
                path: path.to_owned(),
                line,
                source,
            })
        })
        .collect()
}

/// Reads one line into a message, its tokens not counted yet. A line without `session` goes to
/// the options' session (else `"default"`), a line without `persona` to theirs.
pub fn parse_line(text: &str, options: &ImportOptions) -> Result<IncomingMessage, Bad> {
    let Strict(value) = serde_json::from_str(text).map_err(Bad::Json)?;
    let Value::Object(mut object) = value else {
        return Err(Bad::shape("not a message object (expected {\"role\": ..., \"content\": ...})"));
    };
    let session = take_string(&mut object, "session")?;
    let persona = take_string(&mut object, "persona")?;
    // An Anthropic message or a Responses item has an `id` of its own: it stays the message's.
    let own_id = strata_wire::Format::detect(&object) != strata_wire::Format::OpenAi;
    let id = if own_id { None } else { take_string(&mut object, "id")? };
    if id.is_some() && object.get("key").is_some_and(|key| !key.is_null()) {
        return Err(Bad::shape("a line has an \"id\" or a \"key\", not both (they are one thing)"));
    }
    // A message with a body travels whole under "message"; strata's keys stay beside it.
    let object = match object.shift_remove("message") {
        Some(Value::Object(mut message)) => {
            for key in ["timestamp", "key", "pinned"] {
                if let Some(value) = object.shift_remove(key) {
                    message.insert(key.into(), value);
                }
            }
            if let Some(key) = object.keys().next() {
                return Err(Bad::shape(format!("unknown key {key:?} beside \"message\"")));
            }
            message
        }
        Some(other) if !other.is_null() => {
            return Err(Bad::shape("\"message\" must be the message object"));
        }
        _ => object,
    };
    let mut incoming = Incoming::from_json(&Value::Object(object)).map_err(Bad::message)?;
    if id.is_some() {
        incoming.key = id;
    }
    let message = incoming.into_new(options.now);
    message.validate().map_err(Bad::store)?;
    if let Some(persona) = &persona {
        strata_seam::backend::validate_persona(persona).map_err(Bad::store)?;
    }
    Ok(IncomingMessage {
        session_key: session.unwrap_or_else(|| options.session_or(|| "default".to_owned())),
        persona: persona.unwrap_or_else(|| options.persona.clone()),
        message,
        line_digest: Some(strata_seam::transfer::line_digest(text)),
    })
}

/// Removes `key` from the object: its text, or nothing when it is absent or `null`.
fn take_string(object: &mut Map<String, Value>, key: &str) -> Result<Option<String>, Bad> {
    // `shift_remove` keeps the other keys in their order: the message is stored as sent.
    match object.shift_remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(Bad::shape(format!("{key:?} must be a string"))),
    }
}

/// One stored message as a line (without its newline): every field the store keeps, so that
/// [`parse_line`] gives back the same message. The time is written to the nanosecond, as
/// RFC 3339 in UTC, from the stored seconds, which it reproduces exactly.
pub fn write_line(exported: &ExportedMessage) -> String {
    let message = &exported.message;
    let mut line = Map::new();
    if let Some(body) = &message.body {
        // The body as stored, byte for byte: it is JSON text written by strata.
        line.insert("message".into(), serde_json::from_str(body).unwrap_or(Value::Null));
    } else {
        line.insert("role".into(), Value::from(message.role.as_str()));
        // An assistant message that only calls tools is written as the OpenAI API writes it.
        let content = if message.content.is_empty()
            && message.role == Role::Assistant
            && message.tool_calls.is_some()
        {
            Value::Null
        } else {
            Value::from(message.content.as_str())
        };
        line.insert("content".into(), content);
        if let Some(calls) = &message.tool_calls {
            line.insert("tool_calls".into(), calls.clone());
        }
        if let Some(id) = &message.tool_call_id {
            line.insert("tool_call_id".into(), Value::from(id.as_str()));
        }
        if let Some(name) = &message.name {
            line.insert("name".into(), Value::from(name.as_str()));
        }
    }
    line.insert("timestamp".into(), Value::from(rfc3339(exported.created_at_seconds)));
    line.insert("session".into(), Value::from(exported.session_key.as_str()));
    line.insert("persona".into(), Value::from(exported.persona.as_str()));
    if message.pinned {
        line.insert("pinned".into(), Value::Bool(true));
    }
    if let Some(id) = &exported.external_id {
        line.insert("id".into(), Value::from(id.as_str()));
    }
    Value::Object(line).to_string()
}

/// Stored UNIX seconds as RFC 3339 text that parses back to the same seconds, bit for bit:
/// the shortest of whole seconds, milliseconds, microseconds and nanoseconds that does (a
/// stored time was written as seconds plus nanoseconds, and an `f64` of today's times holds a
/// quarter of a microsecond at best, so `.999999` is stored as `.999999046...`).
pub fn rfc3339(seconds: f64) -> String {
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9).round() as i64;
    let base = DateTime::from_timestamp(whole as i64, 0).unwrap_or(DateTime::UNIX_EPOCH);
    let at = |unit: i64| base + TimeDelta::nanoseconds((nanos as f64 / unit as f64).round() as i64 * unit);
    let time = [1_000_000_000, 1_000_000, 1_000]
        .into_iter()
        .map(at)
        .find(|time| strata_seam::backend::to_unix(*time).to_bits() == seconds.to_bits())
        .unwrap_or_else(|| at(1));
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A JSON value whose objects were checked for duplicate keys while it was read.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Strict, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(value.into())
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(Strict(value)) = seq.next_element()? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use chrono::Utc;

    use super::*;

    fn options() -> ImportOptions {
        ImportOptions::new("p")
    }

    /// What the two readers of the OpenAI message shape accept and refuse: a line of strata's
    /// JSON Lines and a bot's message dict (`Incoming::from_json`). They share the message;
    /// only the line has `session`, `persona` and `id`, and refuses duplicate keys.
    #[test]
    fn the_line_and_the_bindings_read_the_message_alike() {
        // (input, the line reads it, from_json reads it)
        let cases: &[(&str, bool, bool)] = &[
            (r#"{"role": "user", "content": "hi"}"#, true, true),
            (
                r#"{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}"#,
                true,
                true,
            ),
            (r#"{"role": "assistant", "content": null, "refusal": "I can't."}"#, true, true),
            (
                r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}"#,
                true,
                true,
            ),
            (r#"{"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"}"#, true, true),
            (r#"{"role": "user", "content": "x", "timestamp": 1767225600.5}"#, true, true),
            (
                r#"{"role": "user", "content": "x", "timestamp": "2026-01-31T09:30:00.123456789Z"}"#,
                true,
                true,
            ),
            (r#"{"role": "user", "content": "x", "key": "k1", "pinned": true}"#, true, true),
            (r#"{"role": "user", "content": "x", "annotations": [], "audio": null}"#, true, true),
            (r#"{"role": "user", "content": "x", "session": "s", "persona": "q", "id": "k1"}"#, true, true),
            (r#"{"role": "user", "content": "x", "id": "k1", "key": "k2"}"#, false, true),
            (r#"{"role": "user", "role": "system", "content": "x"}"#, false, true),
            (r#"{"role": "user", "content": "x", "sesion": "s"}"#, true, true),
            (
                r#"{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}"#,
                true,
                true,
            ),
            (r#"{"message": {"role": "user", "content": "x", "id": "m1"}, "id": "k1"}"#, true, false),
            (r#"{"message": {"role": "user", "content": "x"}, "role": "user"}"#, false, false),
            (r#"{"role": "robot", "content": "x"}"#, false, false),
            (r#"{"role": "user"}"#, false, false),
            (r#"{"role": "user", "content": "x", "timestamp": "noon"}"#, false, false),
            (r#"{"role": "user", "content": "x", "session": 7}"#, false, true),
            (r#"["user", "x"]"#, false, false),
        ];
        for (input, line_reads, dict_reads) in cases {
            let line = parse_line(input, &options());
            assert_eq!(line.is_ok(), *line_reads, "line {input}: {:?}", line.err());
            let dict = serde_json::from_str::<Value>(input)
                .map_err(|_| ())
                .and_then(|v| Incoming::from_json(&v).map_err(|_| ()));
            assert_eq!(dict.is_ok(), *dict_reads, "from_json {input}");
        }
    }

    #[test]
    fn a_line_fills_in_the_defaults_and_keeps_its_own() {
        let own = parse_line(
            r#"{"role": "user", "content": "x", "session": "s", "persona": "q", "id": "k"}"#,
            &options(),
        )
        .unwrap();
        assert_eq!(
            (own.session_key.as_str(), own.persona.as_str(), own.message.external_id.as_deref()),
            ("s", "q", Some("k"))
        );
        let bare = parse_line(r#"{"role": "user", "content": "x"}"#, &options().with_session("t")).unwrap();
        assert_eq!((bare.session_key.as_str(), bare.persona.as_str()), ("t", "p"));
        let kept = parse_line(r#"{"role": "user", "content": "x", "extra": 1}"#, &options()).unwrap();
        assert_eq!(kept.message.body.as_deref(), Some(r#"{"role":"user","content":"x","extra":1}"#));
    }

    #[test]
    fn a_written_line_reads_back_as_the_same_message() {
        let time =
            DateTime::parse_from_rfc3339("2026-01-31T09:30:00.123456789Z").unwrap().with_timezone(&Utc);
        let seconds = strata_seam::backend::to_unix(time);
        let exported = ExportedMessage {
            session_key: "s ü".into(),
            persona: "coder".into(),
            message: strata_seam::Message {
                id: strata_seam::MessageId(1),
                session_id: strata_seam::SessionId(1),
                seq: 0,
                role: Role::Assistant,
                content: String::new(),
                tool_calls: Some(
                    json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]),
                ),
                tool_call_id: None,
                name: Some("bot".into()),
                created_at: strata_seam::backend::from_unix(seconds),
                token_count: 0,
                pinned: true,
                summary_id: None,
                body: None,
            },
            created_at_seconds: seconds,
            external_id: Some("k-1".into()),
        };
        let line = write_line(&exported);
        let read = parse_line(&line, &options()).unwrap();
        assert_eq!(strata_seam::backend::to_unix(read.message.created_at), seconds, "{line}");
        assert_eq!((read.session_key.as_str(), read.persona.as_str()), ("s ü", "coder"));
        assert_eq!(read.message.tool_calls, exported.message.tool_calls);
        assert_eq!(read.message.content, "");
        assert_eq!((read.message.pinned, read.message.external_id.as_deref()), (true, Some("k-1")));
        assert_eq!(read.message.name.as_deref(), Some("bot"));
    }

    proptest! {
        /// Any stored time is written so that it reads back to the same seconds, bit for bit.
        #[test]
        fn every_time_round_trips(secs in 0i64..253_402_300_799, nanos in 0u32..1_000_000_000) {
            let seconds = strata_seam::backend::to_unix(DateTime::from_timestamp(secs, nanos).unwrap());
            let text = rfc3339(seconds);
            let back = DateTime::parse_from_rfc3339(&text).unwrap().with_timezone(&Utc);
            prop_assert_eq!(strata_seam::backend::to_unix(back).to_bits(), seconds.to_bits(), "{}", text);
        }
    }

    /// A line that is nearly a message: known and unknown keys with values of any JSON type.
    fn near_message() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "\\PC{0,20}".prop_map(Value::String),
            prop::sample::select(vec!["user", "assistant", "tool", "system", "2026-01-31T09:30:00Z"])
                .prop_map(|s| json!(s)),
            Just(json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])),
        ];
        let known: Vec<&str> =
            ["role", "content", "name", "tool_calls", "tool_call_id", "timestamp", "key", "pinned"]
                .iter()
                .chain(&LINE_KEYS)
                .copied()
                .collect();
        let key = prop_oneof![prop::sample::select(known).prop_map(str::to_owned), "[a-z]{1,8}"];
        prop::collection::btree_map(key, value, 0..8)
            .prop_map(|map| Value::Object(map.into_iter().collect()).to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any line parses into a message or an error that names the problem on one line.
        #[test]
        fn any_line_is_a_message_or_one_clear_error(
            line in prop_oneof![near_message(), "\\PC{0,60}"],
            lenient in any::<bool>(),
        ) {
            let options = ImportOptions { allow_unknown_keys: lenient, ..options() };
            match parse_line(&line, &options) {
                Ok(incoming) => {
                    prop_assert!(!incoming.session_key.is_empty());
                    prop_assert!(incoming.line_digest.is_some());
                }
                Err(error) => {
                    let text = strata_seam::error_chain(&error);
                    prop_assert!(!text.is_empty() && !text.contains('\n'), "{} -> {}", line, text);
                }
            }
        }
    }
}
