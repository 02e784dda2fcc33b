//! A seeded generator of long, realistic conversations between a user and a coding assistant.
//!
//! The demo, the benches and the end-to-end tests need transcripts that look like real agent
//! work: several days of requests, tool calls with their (often large) results, decisions,
//! file paths, numbers, a bug and its fix. The same seed always gives the same transcript, with
//! the same fixed clock, so runs and measurements are comparable.
//!
//! A few [`PlantedFact`]s are placed early in the conversation, where compaction will fold them
//! away; the demo then shows that the recall tools still find them.
//!
//! This crate is not published and not part of strata's API: the `strata` binary (`strata
//! demo`, `strata synth`, `strata eval`), the benches and the tests use it.
//!
//! ```
//! let transcript = strata_synth::generate(&strata_synth::TranscriptSpec {
//!     min_messages: 100,
//!     min_chars: 0,
//!     ..Default::default()
//! });
//! assert!(transcript.messages.len() >= 100);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use strata_seam::{NewMessage, Role};

mod team;

pub use team::{TeamChatSpec, generate_team_chat};

/// Characters of content per message on average, for sizing a transcript by message count:
/// `min_chars = messages * CHARS_PER_MESSAGE` gives about 160 o200k tokens per message.
pub const CHARS_PER_MESSAGE: usize = 656;

/// What to generate.
#[derive(Clone, Debug)]
pub struct TranscriptSpec {
    /// The seed; the same seed gives the same transcript.
    pub seed: u64,
    /// Stop after at least this many messages (always at a turn edge).
    pub min_messages: usize,
    /// ...and at least this many characters of content (a proxy for tokens: about 4 per token).
    pub min_chars: usize,
    /// Time of the first message.
    pub start: DateTime<Utc>,
}

impl Default for TranscriptSpec {
    /// About 2,000 messages and 320,000 tokens (o200k) over five days, from 2026-11-02 09:00 UTC.
    fn default() -> TranscriptSpec {
        TranscriptSpec {
            seed: 42,
            min_messages: 1_600,
            min_chars: 1_050_000,
            start: Utc.with_ymd_and_hms(2026, 11, 2, 9, 0, 0).single().expect("valid date"),
        }
    }
}

/// A fact placed in the conversation, with a question that should find it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlantedFact {
    /// What kind of fact: preference, decision, path, number, bug, fix, paraphrase.
    pub kind: &'static str,
    /// The words as planted.
    pub text: &'static str,
    /// A keyword query that finds it.
    pub grep: &'static str,
    /// A paraphrase that semantic search should connect to it.
    pub paraphrase: &'static str,
    /// Index of the message that holds it.
    pub index: usize,
}

/// A generated transcript.
#[derive(Clone, Debug)]
pub struct Transcript {
    /// The messages in order (token counts still zero: the caller's tokenizer counts them).
    pub messages: Vec<NewMessage>,
    /// Facts placed in it.
    pub facts: Vec<PlantedFact>,
}

/// The facts the generator plants, in the order they appear (each in its own early turn).
const FACTS: [(&str, &str, &str, &str); 8] = [
    (
        "preference",
        "Please always indent with tabs, never spaces, and write commit messages in the imperative mood.",
        "tabs never spaces",
        "how does the user like code indented?",
    ),
    (
        "decision",
        "We decided to move the invoices table from MySQL to Postgres 16; the cut-over is on Friday.",
        "Postgres 16",
        "which database are the invoices going to?",
    ),
    (
        "path",
        "The token bucket rate limiter lives in services/gateway/src/limiter/token_bucket.rs.",
        "token_bucket.rs",
        "where is the rate limiting code?",
    ),
    (
        "number",
        "Production runs with a connection pool size of 48 per replica, and we have 6 replicas.",
        "pool size",
        "how many database connections does each replica use?",
    ),
    (
        "bug",
        "The nightly export job crashed at 02:14 with 'connection reset by peer' after the pool gave up with retries=0.",
        "connection reset by peer",
        "why did the overnight export fail?",
    ),
    (
        "fix",
        "Fixed the nightly export crash by setting max_retries = 3 and timeout_secs = 45 in config/pool.toml.",
        "max_retries",
        "what change stopped the export job from crashing?",
    ),
    (
        "paraphrase",
        "Ugh, that was a real merge conflict mess when I brought the feature branch up to date with main.",
        "merge conflict mess",
        "the rebase blew up",
    ),
    (
        "secret",
        "Heads up: the staging database password rotates every 45 days, so never hard-code it anywhere.",
        "rotates every 45 days",
        "how often do the credentials for the test environment change",
    ),
];

const COMPONENTS: [&str; 10] = [
    "billing",
    "gateway",
    "auth",
    "search",
    "notifications",
    "exports",
    "ledger",
    "scheduler",
    "webhooks",
    "reports",
];
const VERBS: [&str; 12] = [
    "refactor",
    "add tests for",
    "speed up",
    "document",
    "fix the flaky test in",
    "add metrics to",
    "review",
    "simplify",
    "add retries to",
    "profile",
    "clean up the error handling in",
    "split",
];
const NOUNS: [&str; 12] = [
    "handler",
    "client",
    "parser",
    "cache",
    "worker",
    "middleware",
    "repository",
    "serializer",
    "config loader",
    "queue consumer",
    "router",
    "validator",
];
const FILES: [&str; 10] = [
    "src/main.rs",
    "src/lib.rs",
    "src/handler.rs",
    "src/client.rs",
    "src/config.rs",
    "src/cache.rs",
    "src/worker.rs",
    "tests/integration.rs",
    "src/error.rs",
    "Cargo.toml",
];
const OUTCOMES: [&str; 8] = [
    "All 142 tests pass now.",
    "The p99 latency dropped from 38 ms to 21 ms.",
    "I kept the public API unchanged.",
    "Two call sites needed updating; both are done.",
    "The change is behind the existing feature flag.",
    "Clippy is clean and the docs build.",
    "I added a regression test named after the bug.",
    "Memory use stayed flat under the load test.",
];
const REQUESTS: [&str; 6] = [
    "Can you {verb} the {noun} in services/{comp}/{file}?",
    "Next: {verb} the {comp} {noun}. Look at services/{comp}/{file} first.",
    "The {comp} {noun} is bothering me. Please {verb} it.",
    "Before lunch, could you {verb} the {noun} of {comp}?",
    "Let's {verb} the {noun} in the {comp} service today.",
    "I'd like you to {verb} the {comp} {noun}; keep the diff small.",
];

impl Transcript {
    /// The messages as JSON Lines in the format `strata ingest` reads (role, content,
    /// timestamp, tool_calls, tool_call_id, name).
    pub fn to_jsonl(&self) -> String {
        let mut text = String::new();
        for message in &self.messages {
            let mut line = json!({
                "role": message.role,
                "content": message.content,
                "timestamp": message.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            });
            if let Some(calls) = &message.tool_calls {
                line["tool_calls"] = calls.clone();
            }
            if let Some(id) = &message.tool_call_id {
                line["tool_call_id"] = json!(id);
            }
            if let Some(name) = &message.name {
                line["name"] = json!(name);
            }
            text.push_str(&line.to_string());
            text.push('\n');
        }
        text
    }
}

/// Generates a transcript.
pub fn generate(spec: &TranscriptSpec) -> Transcript {
    let mut generator = Generator {
        rng: ChaCha8Rng::seed_from_u64(spec.seed),
        clock: spec.start,
        day_start: spec.start,
        messages: Vec::new(),
        chars: 0,
        call: 0,
    };
    generator.push(
        Role::System,
        "You are a careful senior engineer pairing with the user on their services monorepo. \
         Use the tools to read files and run commands before answering.",
    );
    let mut facts = Vec::new();
    let mut turn = 0usize;
    while generator.messages.len() < spec.min_messages || generator.chars < spec.min_chars {
        // Facts go into turns 3, 9, 15, ... so they are folded away early, one per turn.
        let fact = (turn >= 3 && (turn - 3).is_multiple_of(6)).then(|| FACTS.get((turn - 3) / 6)).flatten();
        match fact {
            Some(&(kind, text, grep, paraphrase)) => {
                let index = generator.fact_turn(kind, text);
                facts.push(PlantedFact { kind, text, grep, paraphrase, index });
            }
            None => generator.work_turn(),
        }
        turn += 1;
    }
    Transcript { messages: generator.messages, facts }
}

struct Generator {
    rng: ChaCha8Rng,
    clock: DateTime<Utc>,
    day_start: DateTime<Utc>,
    messages: Vec<NewMessage>,
    chars: usize,
    call: u32,
}

impl Generator {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.rng.random_range(0..items.len())]
    }

    fn tick(&mut self) {
        self.clock += Duration::seconds(self.rng.random_range(15..120));
        // Work days end around 18:00; the next one starts at 09:00.
        if self.clock - self.day_start > Duration::hours(9) {
            self.day_start += Duration::days(1);
            self.clock = self.day_start;
        }
    }

    fn push(&mut self, role: Role, content: &str) -> usize {
        self.push_message(NewMessage::text(role, content))
    }

    fn push_message(&mut self, mut message: NewMessage) -> usize {
        self.tick();
        message.created_at = self.clock;
        self.chars += message.content.len();
        self.messages.push(message);
        self.messages.len() - 1
    }

    fn tool_call(&mut self, name: &str, arguments: serde_json::Value, result: String) {
        self.call += 1;
        let id = format!("call_{:04}", self.call);
        let mut call = NewMessage::text(Role::Assistant, "");
        call.tool_calls = Some(json!([{
            "id": id,
            "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()},
        }]));
        self.push_message(call);
        let mut answer = NewMessage::text(Role::Tool, result);
        answer.tool_call_id = Some(id);
        answer.name = Some(name.to_owned());
        self.push_message(answer);
    }

    fn request(&mut self) -> (String, &'static str, &'static str, &'static str) {
        let (comp, verb, noun, file) =
            (self.pick(&COMPONENTS), self.pick(&VERBS), self.pick(&NOUNS), self.pick(&FILES));
        let text = self
            .pick(&REQUESTS)
            .replace("{verb}", verb)
            .replace("{noun}", noun)
            .replace("{comp}", comp)
            .replace("{file}", file);
        (text, comp, noun, file)
    }

    /// An ordinary unit of work: request, a tool call or two, an answer.
    fn work_turn(&mut self) {
        let (request, comp, noun, file) = self.request();
        self.push(Role::User, &request);
        let path = format!("services/{comp}/{file}");
        let code = self.code_listing(comp, noun);
        self.tool_call("read_file", json!({"path": path}), code);
        if self.rng.random_bool(0.6) {
            let log = self.test_log(comp);
            self.tool_call("run_command", json!({"command": format!("cargo test -p {comp}")}), log);
        }
        let outcome = self.pick(&OUTCOMES);
        let lines = self.rng.random_range(40..110);
        let answer = format!(
            "I changed the {noun} in {path}: it now validates its input up front and returns a typed error \
             instead of panicking, and the hot loop no longer clones the request. {outcome} \
             The diff touches {lines} lines. Next I would look at the {other} {noun2}.",
            other = self.pick(&COMPONENTS),
            noun2 = self.pick(&NOUNS),
        );
        self.push(Role::Assistant, &answer);
    }

    /// A turn carrying one planted fact; returns the index of the message that holds it.
    fn fact_turn(&mut self, kind: &str, text: &str) -> usize {
        match kind {
            "bug" => {
                self.push(Role::User, "The nightly export failed again. Can you look at the logs?");
                let mut log = self.test_log("exports");
                log.push_str("\n02:14:07 ERROR pool: connection reset by peer (retries=0)\n02:14:07 ERROR export job aborted\n");
                self.tool_call("run_command", json!({"command": "journalctl -u export-nightly"}), log);
                self.push(Role::Assistant, text)
            }
            "fix" => {
                self.push(Role::User, "Please fix the export crash now.");
                self.tool_call(
                    "edit_file",
                    json!({"path": "config/pool.toml"}),
                    "[pool]\nmax_retries = 3\ntimeout_secs = 45\nsize = 48\n".to_owned(),
                );
                self.push(Role::Assistant, text)
            }
            _ => {
                let index = self.push(Role::User, text);
                let ack = match kind {
                    "preference" => "Understood: tabs only, and imperative commit messages from now on.",
                    "decision" => "Noted the decision: invoices go to Postgres 16, cut-over Friday.",
                    "path" => "Got it, I'll look for the limiter in the gateway service.",
                    "number" => "Noted: pool size 48 per replica across 6 replicas, 288 connections in all.",
                    "secret" => "Understood, I'll read it from the secret store at start-up instead.",
                    _ => "Sorry about that. The branch is clean now and the build is green.",
                };
                self.push(Role::Assistant, ack);
                index
            }
        }
    }

    fn code_listing(&mut self, comp: &str, noun: &str) -> String {
        let functions = self.rng.random_range(3..9);
        let mut code =
            format!("//! The {comp} {noun}.\n\nuse std::collections::HashMap;\nuse crate::error::Error;\n\n");
        for f in 0..functions {
            let name =
                format!("{}_{}", self.pick(&["load", "handle", "parse", "flush", "retry", "route"]), f);
            let field = self.pick(&["id", "amount", "tenant", "deadline", "payload", "attempts"]);
            let limit: u32 = self.rng.random_range(2..500);
            code.push_str(&format!(
                "pub fn {name}(input: &Request, state: &mut HashMap<String, u64>) -> Result<Response, Error> {{\n\
                 \tlet {field} = input.{field}().ok_or(Error::Missing(\"{field}\"))?;\n\
                 \tif state.len() > {limit} {{\n\t\treturn Err(Error::Overloaded {{ limit: {limit} }});\n\t}}\n\
                 \tstate.insert({field}.to_string(), {limit});\n\
                 \tOk(Response::accepted({field}))\n}}\n\n"
            ));
        }
        code
    }

    fn test_log(&mut self, comp: &str) -> String {
        let tests = self.rng.random_range(8..40);
        let mut log = format!(
            "   Compiling {comp} v0.4.2\n    Finished test profile in 14.2s\n     Running unittests\n"
        );
        for t in 0..tests {
            let name = format!("{}_{}", self.pick(&NOUNS).replace(' ', "_"), t);
            log.push_str(&format!("test {comp}::tests::{name} ... ok\n"));
        }
        log.push_str(&format!("\ntest result: ok. {tests} passed; 0 failed; 0 ignored\n"));
        log
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_transcript() {
        let spec = TranscriptSpec { min_messages: 200, min_chars: 0, ..TranscriptSpec::default() };
        let a = generate(&spec);
        let b = generate(&spec);
        assert_eq!(a.messages, b.messages);
        let c = generate(&TranscriptSpec { seed: 7, ..spec });
        assert_ne!(a.messages, c.messages);
    }

    #[test]
    fn facts_are_planted_and_tool_calls_are_paired() {
        let transcript =
            generate(&TranscriptSpec { min_messages: 300, min_chars: 0, ..TranscriptSpec::default() });
        assert_eq!(transcript.facts.len(), FACTS.len());
        for fact in &transcript.facts {
            assert!(transcript.messages[fact.index].content.contains(fact.text), "{fact:?}");
        }
        for (i, message) in transcript.messages.iter().enumerate() {
            if let Some(calls) = &message.tool_calls {
                let id = calls[0]["id"].as_str().unwrap();
                let answer = &transcript.messages[i + 1];
                assert_eq!((answer.role, answer.tool_call_id.as_deref()), (Role::Tool, Some(id)));
            }
        }
        let times: Vec<_> = transcript.messages.iter().map(|m| m.created_at).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "time moves forward");
    }
}
