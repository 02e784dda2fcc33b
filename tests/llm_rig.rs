//! End to end against a real local model server: llama-cpp-python with Qwen2.5-Coder-1.5B, as
//! set up by `scripts/llm-rig.sh` (`make test-llm` starts it and runs this). Opt-in: built only
//! with the `llm-rig` feature, since one summary takes a minute or two on two cores.
//!
//! It runs what a user with a local model runs: `strata compact` with the OpenAI-compatible
//! summarizer, then two `strata chat` turns in a new session, the second with the first one's
//! tool calls in its history, in each of which the model must call `memory_grep` and answer
//! from what it found. A failure says which part failed: strata's (a request refused, no
//! answer) or the model's (no call, and what it wrote instead; an answer without the fact). It prints the timings and the
//! stored summary (`--nocapture` shows them; `make test-llm` passes it).

#[path = "util.rs"]
#[allow(dead_code)]
mod util;

use std::io::Write;
use std::process::Stdio;
use std::time::Instant;

use serde_json::Value;
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

/// The fact the earlier tool call of the chat session found.
const CUTOVER: &str = "Billing cutover on Tuesday March 10, with Thursday March 12 as the fallback date.";

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

/// One turn of `strata chat --json`: whether the model called memory_grep, the call found
/// `fact`, and the answer uses it; the failure names the turn and what the model did instead.
fn check_turn(turn: &Value, which: &str, fact: &str) -> Result<(), String> {
    let answer = turn["text"].as_str().unwrap();
    let calls = turn["tool_calls"].as_array().unwrap();
    // The model called memory_grep (natively or as text strata recognises) and the call ran.
    let Some(grep) = calls
        .iter()
        .find(|call| call["name"] == "memory_grep" && call["result"]["count"].as_u64().unwrap_or(0) > 0)
    else {
        return Err(format!(
            "{which}: the model ({MODEL}) did not call memory_grep: {}. The server accepted every request; \
             the model's reply:\n{answer}",
            diagnosis(answer)
        ));
    };
    if !grep["result"].to_string().contains(fact) {
        return Err(format!("{which}: memory_grep did not find {fact:?}: {grep:#}"));
    }
    // The answer uses what the call found.
    if !answer.contains(fact) {
        return Err(format!("{which}: the answer does not use what memory_grep found ({fact:?}): {answer}"));
    }
    Ok(())
}

#[test]
fn a_chat_turn_in_a_session_with_tool_calls_runs_memory_grep_and_answers_from_it() {
    let strata = Strata::new();
    let config_path = rig_config(&strata);
    let config_arg = config_path.to_str().unwrap();
    let config = Config::load(Some(&config_path), std::iter::empty()).unwrap();
    let engine = Engine::open(strata.db(), config).unwrap();
    // Facts only memory_grep can find: they live in an older session of the persona.
    let old = engine.session("last-week", "team").unwrap();
    old.append(ChatMessage::user("Where did we leave the gateway?")).unwrap();
    old.append(ChatMessage::assistant(PLANTED)).unwrap();
    old.append(ChatMessage::assistant(CUTOVER)).unwrap();
    drop(engine);

    // Two turns of `strata chat` in a new session: the first in a session without tool calls,
    // the second in a session whose history holds the first turn's calls and results (sent
    // back with content "", which this server requires). At the server's default temperature,
    // what a user gets; both turns run, and the failures of both are reported.
    let questions = [
        (
            "turn 1 (no tool calls in the history)",
            "What is the gateway rate limit? Search the memory with memory_grep for \"rate limit\" and answer with the number.",
            "250",
        ),
        (
            "turn 2 (the first turn's tool calls in the history)",
            "When is the billing cutover? Search the memory with memory_grep for \"cutover\" and answer with the date.",
            "March 10",
        ),
    ];
    let mut failures = Vec::new();
    for (which, question, fact) in questions {
        let started = Instant::now();
        let mut child = strata
            .command()
            .args(["--config", config_arg, "--json", "chat", "--session", "today", "--persona", "team"])
            .args(["--base-url", &base_url(), "--model", MODEL, "--max-tokens", "128", "--timeout", "900"])
            .args(["--max-tool-rounds", "3", "--no-embed"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(format!("{question}\n").as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let secs = started.elapsed().as_secs_f64();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        println!("{which}: {secs:.1} s\n{stderr}{stdout}");
        if !output.status.success() {
            // A refused request is strata's failure; an empty reply or endless calls, the model's.
            let models =
                stderr.contains("the model sent an empty reply") || stderr.contains("still calling tools");
            assert!(models, "{which}: strata's part failed (a request was refused):\n{stderr}");
            failures.push(format!("{which}: the model ({MODEL}) gave no answer: {}", stderr.trim()));
            continue;
        }
        let turn: Value =
            serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("one JSON line ({e}): {stdout}"));
        if let Err(failure) = check_turn(&turn, which, fact) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// What a reply that should have been a tool call is instead, in words.
fn diagnosis(reply: &str) -> &'static str {
    let reply = reply.trim_start();
    if reply.starts_with("<tool_response>") {
        "its reply imitates the tool's answer (a made-up <tool_response>, as the chat template shows tool results) \
         instead of calling the tool"
    } else if reply.contains("memory_grep") {
        "it wrote about the tool in prose instead of calling it"
    } else {
        "it answered without calling a tool"
    }
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
    let run = strata.run(&["compact", "--session", "migration", "--config", config_arg, "--once", "--json"]);
    let compact_secs = started.elapsed().as_secs_f64();
    // Rejections per reason; why each was rejected is in the error line of a failed compact.
    let stats = strata.run(&["stats", "--json"]).json();
    assert!(
        run.ok,
        "no summary of {MODEL} passed the gate ({compact_secs:.0} s): {}rejections: {}",
        run.stderr, stats["rejections"]
    );
    let compacted: Value = serde_json::from_str(&run.stdout).unwrap();
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
