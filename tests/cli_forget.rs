//! `strata forget`: a persona, a session or a session's start erased with everything derived
//! from it, the bytes gone from the file, the rest unchanged, `doctor` content.

use crate::util::Strata;

/// A JSON Lines transcript of `turns` user/assistant pairs for `persona`, each message holding
/// a word unique to it (`<Tag>Quokka0001`), one minute apart from 2025-03-01 09:00 UTC.
fn transcript(persona: &str, tag: &str, turns: usize) -> String {
    let mut lines = String::new();
    for i in 0..turns * 2 {
        let role = if i.is_multiple_of(2) { "user" } else { "assistant" };
        let content = format!(
            "{tag}Quokka{i:04} is the code for step {i}. We moved the deploy window, checked the \
             migration plan, reviewed the pool settings and wrote down what the staging run showed \
             about latency, retries and the dashboard alerts before lunch on day {}.",
            i / 40
        );
        let time = chrono::DateTime::parse_from_rfc3339("2025-03-01T09:00:00Z").unwrap()
            + chrono::Duration::minutes(i as i64);
        lines.push_str(
            &serde_json::json!({
                "role": role, "content": content, "session": format!("{persona}-week"),
                "persona": persona, "timestamp": time.to_rfc3339()
            })
            .to_string(),
        );
        lines.push('\n');
    }
    lines
}

fn file_bytes(strata: &Strata) -> Vec<u8> {
    let mut bytes = std::fs::read(strata.db()).unwrap();
    let mut wal = strata.db().as_os_str().to_owned();
    wal.push("-wal");
    bytes.extend(std::fs::read(&wal).unwrap_or_default());
    bytes
}

fn count(bytes: &[u8], needle: &str) -> usize {
    bytes.windows(needle.len()).filter(|window| *window == needle.as_bytes()).count()
}

/// Two personas, each with a compacted session, a memory and vectors-to-be.
fn two_personas(strata: &Strata) {
    for (persona, tag) in [("alice", "Alice"), ("bob", "Bob")] {
        let file = strata.file(&format!("{persona}.jsonl"), &transcript(persona, tag, 150));
        strata.run(&["ingest", file.to_str().unwrap()]).success();
        strata.run(&["compact", "--session", &format!("{persona}-week"), "--window", "8000"]).success();
        let content = format!("{tag}Memo is the release name");
        strata.run(&["memory", "set", "memo", "release", &content, "--persona", persona]).success();
    }
}

#[test]
fn forget_persona_leaves_none_of_its_bytes_and_bob_unchanged() {
    let strata = Strata::new();
    two_personas(&strata);
    let bob_before = (
        strata.run(&["--json", "memory", "list", "--persona", "bob"]).success(),
        strata.run(&["--json", "tree", "--session", "bob-week"]).success(),
        strata.run(&["--json", "grep", "BobQuokka0007", "--session", "bob-week"]).success(),
    );
    let bytes = file_bytes(&strata);
    assert!(count(&bytes, "AliceQuokka0123") > 0 && count(&bytes, "AliceMemo") > 0, "the scan sees the text");
    let nodes = strata.run(&["--json", "tree", "--session", "alice-week"]).json();
    assert!(nodes.to_string().contains("Alice"), "alice's summaries quote her words");

    let plan = strata.run(&["--json", "forget", "--persona", "alice", "--dry-run"]).json();
    assert_eq!(plan["counts"]["messages"], 300);
    assert_eq!(plan["counts"]["memories"], 1);
    assert!(plan["counts"]["summaries"].as_u64().unwrap() >= 2, "{plan}");
    assert!(count(&file_bytes(&strata), "AliceQuokka0123") > 0, "a dry run erases nothing");

    let done = strata.run(&["--json", "forget", "--persona", "alice"]).json();
    assert_eq!(done["counts"], plan["counts"]);
    assert_eq!(done["wal_truncated"], true);
    let bytes = file_bytes(&strata);
    let left: Vec<String> = (0..300)
        .map(|i| format!("AliceQuokka{i:04}"))
        .chain(["AliceMemo".to_owned()])
        .filter(|word| count(&bytes, word) > 0)
        .collect();
    assert!(left.is_empty(), "alice's words still in the file: {left:?}");
    // Not a lowercased word of hers in the word index either.
    assert_eq!(count(&bytes, "alicequokka0123"), 0);
    assert!(count(&bytes, "BobQuokka0123") > 0, "bob's messages stay");
    let bob_after = (
        strata.run(&["--json", "memory", "list", "--persona", "bob"]).success(),
        strata.run(&["--json", "tree", "--session", "bob-week"]).success(),
        strata.run(&["--json", "grep", "BobQuokka0007", "--session", "bob-week"]).success(),
    );
    assert_eq!(bob_after, bob_before);
    strata.run(&["doctor", "--full"]).success();
    let error = strata.run(&["forget", "--persona", "alice"]).failure();
    assert!(error.contains("nothing to forget"), "{error}");
}

#[test]
fn forget_before_rewrites_the_node_that_keeps_messages() {
    let strata = Strata::new();
    two_personas(&strata);
    // Messages 0..=100 go; the node that covers message 100 and later ones is summarized again.
    let out =
        strata.run(&["--json", "forget", "--session", "bob-week", "--before", "2025-03-01T10:41:00Z"]).json();
    assert_eq!(out["counts"]["messages"], 101, "{out}");
    assert_eq!(out["counts"]["sessions"], 0);
    let tree = strata.run(&["--json", "tree", "--session", "bob-week"]).success();
    strata.run(&["doctor", "--full"]).success();
    // The file's bytes; PostgreSQL's files are read by crates/pg/tests/invariants.rs.
    if !crate::util::on_postgres() {
        let bytes = file_bytes(&strata);
        assert_eq!(count(&bytes, "BobQuokka0050"), 0);
        assert!(count(&bytes, "BobQuokka0250") > 0);
    }
    let viewed = strata.run(&["--json", "grep", "BobQuokka0050", "--session", "bob-week"]).json();
    assert_eq!(viewed["count"], 0, "a forgotten message is found: {viewed}");
    if out["counts"]["rebuilt"] == 1 {
        assert_eq!(out["markers"], 0, "the extractive summarizer runs offline: {out}");
        assert!(!tree.contains("BobQuokka0099"), "the rewritten node holds no forgotten words");
    }
    // The kept messages are still found; alice's session is untouched.
    let found = strata.run(&["--json", "grep", "BobQuokka0250", "--session", "bob-week"]).json();
    assert!(found.to_string().contains("BobQuokka0250"));
    let audit = strata.run(&["--json", "forget", "--session", "alice-week", "--dry-run"]).json();
    assert_eq!(audit["counts"]["messages"], 300);
}

#[test]
fn forget_refuses_bad_requests_cleanly() {
    let strata = Strata::new();
    two_personas(&strata);
    assert!(strata.run(&["forget"]).stderr.contains("--persona"));
    assert!(!strata.run(&["forget", "--before", "2025-01-01", "--persona", "bob"]).ok);
    let error = strata.run(&["forget", "--session", "nope"]).failure();
    assert!(error.contains("nope"), "{error}");
    assert!(!strata.run(&["forget", "--session", "bob-week", "--before", "yesterday"]).ok);
    let still = strata.run(&["--json", "forget", "--persona", "bob", "--dry-run"]).json();
    assert_eq!(still["counts"]["messages"], 300, "nothing changed");
}

/// `strata metrics` prints the Prometheus text format with the database's totals.
#[test]
fn metrics_count_compactions_tokens_and_forgets() {
    let strata = Strata::new();
    two_personas(&strata);
    let value = |text: &str, sample: &str| -> f64 {
        let line =
            text.lines().find(|line| line.starts_with(sample)).unwrap_or_else(|| panic!("{sample}: {text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let text = strata.run(&["metrics"]).success();
    assert!(text.contains("# TYPE strata_compactions_total counter"), "{text}");
    assert!(value(&text, "strata_compactions_total{summarizer=\"extractive\",level=\"0\"}") >= 2.0, "{text}");
    let before = value(&text, "strata_compaction_tokens_before_total{summarizer=\"extractive\"}");
    let after = value(&text, "strata_compaction_tokens_after_total{summarizer=\"extractive\"}");
    assert!(before > after && after > 0.0, "{before} {after}");
    assert_eq!(value(&text, "strata_messages "), 600.0);
    assert_eq!(value(&text, "strata_forgets_total "), 0.0);
    assert!(value(&text, "strata_database_bytes{file=\"db\"}") > 0.0);
    strata.run(&["forget", "--session", "alice-week"]).success();
    let text = strata.run(&["metrics"]).success();
    assert_eq!(value(&text, "strata_forgets_total "), 1.0);
    assert_eq!(value(&text, "strata_messages "), 300.0);
}

/// `memory get` shows where a memory came from; `memory history` lists every version.
#[test]
fn memory_history_lists_every_version_with_its_source() {
    let strata = Strata::new();
    strata.run(&["memory", "set", "memo", "pool_size", "48 per replica.", "--persona", "ops"]).success();
    strata.run(&["memory", "set", "memo", "pool_size", "64 per replica.", "--persona", "ops"]).success();
    let memory = strata.run(&["--json", "memory", "get", "memo", "pool_size", "--persona", "ops"]).json();
    assert_eq!(memory["content"], "64 per replica.");
    assert_eq!(memory["provenance"]["source"], "user");
    assert_eq!(memory["provenance"]["via"], "strata memory set");
    let history = strata.run(&["--json", "memory", "history", "pool_size", "--persona", "ops"]).json();
    let versions = history.as_array().unwrap();
    assert_eq!(versions.len(), 2, "{history}");
    assert_eq!(versions[1]["content"], "48 per replica.");
    assert!(versions[1]["replaced_at"].is_string() && versions[0]["replaced_at"].is_null());
    let text = strata.run(&["memory", "history", "pool_size", "--persona", "ops"]).success();
    assert!(text.contains("from: user via strata memory set") && text.contains("48 per replica."), "{text}");
    let error = strata.run(&["memory", "history", "nope", "--persona", "ops"]).failure();
    assert!(error.contains("nope"), "{error}");
}
