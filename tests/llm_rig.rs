//! End to end against a real local model server: llama-cpp-python with Qwen2.5-Coder-1.5B, as
//! set up by `scripts/llm-rig.sh` (`make test-llm` starts it and runs this). Opt-in: built only
//! with the `llm-rig` feature, since one summary takes a minute or two on two cores.
//!
//! It runs what a user with a local model runs: `strata compact` with the OpenAI-compatible
//! summarizer, then a `strata chat` turn in a session whose history holds a tool call, in which
//! the model calls `memory_grep` and answers from what it found. It prints the timings and the
//! stored summary (`--nocapture` shows them; `make test-llm` passes it).

#[path = "util.rs"]
#[allow(dead_code)]
mod util;

use std::io::Write;
use std::process::Stdio;
use std::time::Instant;

use serde_json::{Value, json};
use strata::{ChatMessage, Config, Engine};

use crate::util::Strata;

/// The model alias the rig's server answers to.
const MODEL: &str = "qwen2.5-coder-1.5b";

/// The fact the model must find with memory_grep: it lives only in an older session.
const PLANTED: &str =
    "Priya set the gateway rate limit to 250 requests per second in services/gateway/src/limiter.rs.";

fn base_url() -> String {
    std::env::var("STRATA_LLM_URL").unwrap_or_else(|_| {
        panic!("set STRATA_LLM_URL to the rig's base URL: run `make test-llm` (scripts/llm-rig.sh start prints it)")
    })
}

/// A made-up team chat about moving a billing database, with checkable facts.
const CHAT: &[(&str, &str, &str)] = &[
    ("user", "Maya", "We need to move billing off the old Postgres 11 box; vendor support ends March 31."),
    ("assistant", "Tomas", "The database is about 420 GB, the invoices table alone is 300 GB."),
    (
        "user",
        "Maya",
        "Finance allows at most 15 minutes of downtime, and never in the first three business days of a month.",
    ),
    (
        "assistant",
        "Tomas",
        "Then a dump and restore is out. Logical replication to the new cluster keeps the downtime to the cutover.",
    ),
    (
        "user",
        "Maya",
        "Agreed, we go with logical replication. Managed Postgres 16 with one replica costs about 1,900 dollars a month.",
    ),
    (
        "user",
        "Maya",
        "Open: who signs off for finance, and whether the audit team needs the audit_log history.",
    ),
    (
        "assistant",
        "Tomas",
        "I will ask Priya about the audit_log history. Next meeting Thursday February 12.",
    ),
];

fn rig_config(strata: &Strata) -> std::path::PathBuf {
    strata.file(
        "rig.toml",
        &format!(
            "[compactor]\nmodel = \"{MODEL}\"\ncontext_window_tokens = 4096\nreserve_tokens = 640\ntrigger_ratio = 0.0\ntarget_ratio = 0.0\nhead_messages = 1\n\
             tail_turns = 1\ntail_tokens = 1000\nleaf_min_tokens = 50\nleaf_min_turns = 2\nleaf_chunk_tokens = 2000\n\
             scaffold_body_tokens = 400\nsummary_target_tokens = 200\nsummary_retries = 1\nmax_rounds = 1\n\
             [compactor.retry]\nmax_attempts = 1\ntimeout_ms = 900000\n\
             [summarizer]\nkind = \"openai\"\nbase_url = \"{url}\"\nmodel = \"{MODEL}\"\n",
            url = base_url()
        ),
    )
}

#[test]
fn a_chat_turn_in_a_session_with_tool_calls_runs_memory_grep_and_answers_from_it() {
    let strata = Strata::new();
    let config_path = rig_config(&strata);
    let config_arg = config_path.to_str().unwrap();
    let config = Config::load(Some(&config_path), std::iter::empty()).unwrap();
    let engine = Engine::open(strata.db(), config).unwrap();

    // A chat turn: the session already holds a tool call (sent back with content "", which
    //    this server requires), and the answer needs a fact only memory_grep can find.
    let old = engine.session("last-week", "team").unwrap();
    old.append(ChatMessage::user("Where did we leave the gateway?")).unwrap();
    old.append(ChatMessage::assistant(PLANTED)).unwrap();
    let today = engine.session("today", "team").unwrap();
    // As `strata chat` begins a new session.
    today.append(ChatMessage::system(strata::chat::DEFAULT_SYSTEM_PROMPT)).unwrap();
    today.append(ChatMessage::user("Did we write anything down about the billing cutover?")).unwrap();
    let call = json!([{"id": "call_0", "type": "function", "function": {"name": "memory_grep", "arguments": "{\"query\": \"cutover\"}"}}]);
    today
        .append(ChatMessage { tool_calls: Some(call), content: None, ..ChatMessage::assistant("") })
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let result = runtime.block_on(today.call_tool("memory_grep", json!({"query": "cutover"})));
    today.append(ChatMessage::tool("call_0", "memory_grep", result.to_string())).unwrap();
    today
        .append(ChatMessage::assistant(
            "Yes: the cutover is on Tuesday March 10, with March 12 as the fallback.",
        ))
        .unwrap();
    drop(engine);

    let started = Instant::now();
    let mut child = strata
        .command()
        .args(["--config", config_arg, "--json", "chat", "--session", "today", "--base-url", &base_url()])
        .args([
            "--model",
            MODEL,
            "--max-tokens",
            "128",
            "--timeout",
            "900",
            "--max-tool-rounds",
            "3",
            "--no-embed",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"What is the gateway rate limit? Search the memory with memory_grep for \"rate limit\" and answer with the number.\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let chat_secs = started.elapsed().as_secs_f64();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "strata chat failed:\nstdout: {stdout}\nstderr: {stderr}");
    let turn: Value = serde_json::from_str(stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("one JSON line per turn ({e}): {stdout}"));
    println!("chat turn: {chat_secs:.1} s, {} requests\n{turn:#}", turn["requests"]);
    let calls = turn["tool_calls"].as_array().unwrap();
    let grep = calls
        .iter()
        .find(|call| call["name"] == "memory_grep" && call["result"]["count"].as_u64().unwrap_or(0) > 0)
        .unwrap_or_else(|| panic!("the model ran memory_grep and found something: {turn:#}"));
    assert!(grep["result"].to_string().contains("250"), "{grep:#}");
    let answer = turn["text"].as_str().unwrap();
    assert!(answer.contains("250"), "the answer uses what memory_grep found: {answer}");
}

#[test]
fn a_compaction_with_the_openai_summarizer_stores_only_summaries_that_pass_the_gate() {
    let strata = Strata::new();
    let config_path = rig_config(&strata);
    let config_arg = config_path.to_str().unwrap();
    let config = Config::load(Some(&config_path), std::iter::empty()).unwrap();
    let engine = Engine::open(strata.db(), config).unwrap();

    // A compaction with the OpenAI-compatible summarizer, from the command line.
    let meeting = engine.session("migration", "team").unwrap();
    for (role, name, text) in CHAT {
        let mut message =
            if *role == "user" { ChatMessage::user(*text) } else { ChatMessage::assistant(*text) };
        message.name = Some((*name).to_owned());
        meeting.append(message).unwrap();
    }
    let started = Instant::now();
    let compacted =
        strata.run(&["compact", "--session", "migration", "--config", config_arg, "--once", "--json"]).json();
    let compact_secs = started.elapsed().as_secs_f64();
    assert!(compacted["nodes_created"].as_u64().unwrap() >= 1, "{compacted}");
    assert_eq!(compacted["raw_archived"], 0, "a real summary, not a fallback digest: {compacted}");
    let tree = strata.run(&["tree", "--session", "migration", "--json"]).json();
    let nodes = tree["nodes"].as_array().unwrap();
    for node in nodes {
        assert_eq!(node["summarizer"], MODEL, "{node}");
        // The gate held: at most half the tokens of the sources.
        let (tokens, sources) =
            (node["token_count"].as_u64().unwrap(), node["source_token_count"].as_u64().unwrap());
        assert!(tokens * 2 <= sources, "{tokens} of {sources} tokens: {node}");
    }
    let stats = strata.run(&["stats", "--json"]).json();
    println!("compaction: {compact_secs:.1} s, {} nodes; rejections: {}", nodes.len(), stats["rejections"]);
    for node in nodes {
        println!(
            "stored summary (node {}, {} of {} tokens):\nheadline: {}\nbody:\n{}",
            node["id"],
            node["token_count"],
            node["source_token_count"],
            node["headline"],
            node["body"].as_str().unwrap()
        );
    }
}
