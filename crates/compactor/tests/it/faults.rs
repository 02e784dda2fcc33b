//! 500 turns against a summarizer server that misbehaves in every way a real one does: the
//! context stays inside its budget on every turn, and nothing bad is ever stored as a summary.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use strata_compactor::summarize::RAW_ARCHIVE;
use strata_compactor::{CompactorConfig, OpenAiConfig, OpenAiSummarizer};
use strata_llm::RetryPolicy;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::util::{Turn, fixture_with, t0, words};
use strata_seam::Forest;

const MODEL: &str = "flaky-model";

/// The replies of a flaky server, drawn from a seeded generator so every run is the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fault {
    Good,
    TooManyRequests,
    ServerError,
    Hang,
    TruncatedJson,
    Oversized,
    Empty,
}

struct FlakyServer {
    rng: std::sync::Mutex<ChaCha8Rng>,
    counts: [AtomicU64; 7],
}

impl FlakyServer {
    fn draw(&self) -> Fault {
        let roll = self.rng.lock().unwrap().random_range(0..100);
        match roll {
            0..55 => Fault::Good,
            55..63 => Fault::TooManyRequests,
            63..71 => Fault::ServerError,
            71..75 => Fault::Hang,
            75..85 => Fault::TruncatedJson,
            85..93 => Fault::Oversized,
            _ => Fault::Empty,
        }
    }
}

fn tool_call(arguments: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "save_summary", "arguments": arguments}}]}}]
    }))
}

impl Respond for FlakyServer {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let fault = self.draw();
        self.counts[fault as usize].fetch_add(1, Ordering::Relaxed);
        match fault {
            Fault::Good => tool_call(
                &json!({"headline": "GOOD summary of the turns.", "body": "Timeline:\n- GOOD: the work went on"})
                    .to_string(),
            ),
            Fault::TooManyRequests => ResponseTemplate::new(429).insert_header("retry-after", "0"),
            Fault::ServerError => ResponseTemplate::new(500).set_body_string("upstream exploded"),
            // Longer than the client's timeout: the attempt is abandoned and retried.
            Fault::Hang => tool_call("{}").set_delay(Duration::from_millis(2_000)),
            Fault::TruncatedJson => tool_call("{\"headline\": \"TRUNCATED summ"),
            Fault::Oversized => tool_call(
                &json!({"headline": "OVERSIZED summary.", "body": format!("OVERSIZED {}", words(7, 4_000))})
                    .to_string(),
            ),
            Fault::Empty => tool_call(&json!({"headline": "", "body": ""}).to_string()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_turns_against_a_flaky_summarizer() {
    let server = MockServer::start().await;
    let flaky = Arc::new(FlakyServer {
        rng: std::sync::Mutex::new(ChaCha8Rng::seed_from_u64(0x5EED)),
        counts: Default::default(),
    });
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(FlakyRef(flaky.clone()))
        .mount(&server)
        .await;
    let retry = RetryPolicy { max_attempts: 2, initial_backoff_ms: 1, max_backoff_ms: 5, timeout_ms: 300 };
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        context_window_tokens: 6_000,
        reserve_tokens: 1_000,
        head_messages: 1,
        tail_turns: 2,
        tail_tokens: 600,
        leaf_min_tokens: 400,
        leaf_min_turns: 2,
        leaf_chunk_tokens: 600,
        summary_target_tokens: 200,
        scaffold_body_tokens: 1_000,
        summary_max_tokens: 300,
        failures_before_raw_archive: 3,
        retry: retry.clone(),
        ..CompactorConfig::default()
    };
    let summarizer = OpenAiSummarizer::new(OpenAiConfig {
        base_url: server.uri(),
        model: MODEL.into(),
        api_key: None,
        retry,
        temperature: 0.0,
        max_output_tokens: 0,
    })
    .unwrap();
    let fx = fixture_with(config.clone(), Arc::new(summarizer));
    fx.push(strata_seam::NewMessage::text(strata_seam::Role::System, "You are a careful coding agent."), 0);
    let mut minute = 1;
    let mut compacted_turns = 0;
    for i in 0..500u64 {
        let mut turn =
            Turn::plain(format!("Request {i}: {}", words(i, 40)), format!("Reply {i}: {}", words(i + 9, 40)));
        if i % 17 == 0 {
            turn.tool_results = vec![format!("output {i}: {}", words(i + 3, 120))];
        }
        minute = fx.push_turn(&turn, minute);
        // What a bot does before every model call: compact, then assemble.
        let outcome =
            fx.compactor.compact(fx.session).await.expect("compaction never errors on summarizer faults");
        compacted_turns += usize::from(matches!(outcome, strata_compactor::Outcome::Compacted { .. }));
        let context = fx
            .compactor
            .assemble(fx.session, t0() + chrono::Duration::minutes(minute))
            .await
            .expect("the context always fits");
        assert!(
            context.tokens.total <= context.tokens.budget,
            "turn {i}: {} tokens over a budget of {}",
            context.tokens.total,
            context.tokens.budget
        );
    }
    let nodes = fx.store.nodes(fx.session).unwrap();
    for node in &nodes {
        let text = format!("{}\n{}", node.headline, node.body);
        assert!(
            !text.contains("OVERSIZED") && !text.contains("TRUNCATED"),
            "a bad summary was stored: {text}"
        );
        assert!(!node.headline.trim().is_empty() && !node.body.trim().is_empty(), "empty summary stored");
        assert!(
            node.token_count <= config.summary_max_tokens,
            "node {} has {} tokens",
            node.id,
            node.token_count
        );
        assert!(
            node.summarizer == MODEL || node.summarizer == RAW_ARCHIVE || node.summarizer == "extractive",
            "{}",
            node.summarizer
        );
    }
    let counts: Vec<u64> = flaky.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    eprintln!("faults served (good, 429, 500, hang, truncated, oversized, empty): {counts:?}");
    eprintln!("{} nodes after 500 turns, {compacted_turns} compacting turns", nodes.len());
    assert!(counts.iter().all(|&n| n > 0), "every fault was served at least once: {counts:?}");
    assert!(nodes.iter().any(|n| n.summarizer == MODEL), "good replies were stored");
    assert!(nodes.len() >= 20, "the session kept being compacted: {} nodes", nodes.len());
}

/// wiremock wants an owned responder; this one shares the counters with the test.
struct FlakyRef(Arc<FlakyServer>);

impl Respond for FlakyRef {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.0.respond(request)
    }
}

/// `strata compact` against a dead server, run again and again (a new process each time),
/// reaches the raw-archive fallback: the failure count lives in the database.
#[tokio::test]
async fn failures_count_across_processes_toward_the_raw_archive() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let retry = RetryPolicy { max_attempts: 1, initial_backoff_ms: 1, max_backoff_ms: 1, timeout_ms: 2_000 };
    let config = CompactorConfig {
        trigger_ratio: 0.0,
        target_ratio: 0.0,
        head_messages: 0,
        tail_turns: 1,
        leaf_min_tokens: 100,
        leaf_min_turns: 1,
        leaf_chunk_tokens: 400,
        max_rounds: 1,
        failures_before_raw_archive: 3,
        retry: retry.clone(),
        ..CompactorConfig::default()
    };
    let open = |store: strata_store::Store| {
        let summarizer = OpenAiSummarizer::new(OpenAiConfig {
            base_url: server.uri(),
            model: MODEL.into(),
            api_key: None,
            retry: retry.clone(),
            temperature: 0.0,
            max_output_tokens: 0,
        })
        .unwrap();
        strata_compactor::Compactor::new(store, config.clone(), Arc::new(summarizer)).unwrap()
    };
    let fx = fixture_with(config.clone(), Arc::new(strata_compactor::ExtractiveSummarizer::default()));
    let mut minute = 0;
    for i in 0..4 {
        minute =
            fx.push_turn(&Turn::plain(format!("Request {i}: {}", words(i, 120)), words(i + 50, 120)), minute);
    }
    for attempt in 1..=2 {
        // A new compactor, as a new `strata compact` process would build.
        let outcome = open(fx.store.clone()).compact(fx.session).await.unwrap();
        assert!(
            matches!(outcome, strata_compactor::Outcome::SummarizerDown { consecutive_failures, .. } if consecutive_failures == attempt),
            "attempt {attempt}: {outcome:?}"
        );
        assert!(fx.store.nodes(fx.session).unwrap().is_empty());
    }
    let third = open(fx.store.clone()).compact(fx.session).await.unwrap();
    assert!(matches!(third, strata_compactor::Outcome::Compacted { raw_archived: 1, .. }), "{third:?}");
    assert_eq!(fx.store.nodes(fx.session).unwrap()[0].summarizer, RAW_ARCHIVE);
}
