//! The recall commands: grep, search, expand, embed (and its crash safety), view, memory purge.

use std::process::Stdio;
use std::time::{Duration, Instant};

use strata::seam::{NewMessage, NewSummary, Role};

use crate::util::Strata;

/// A database with two personas: `coder` (sessions `billing` and `infra`) and `chef`.
fn populated(strata: &Strata) -> strata_seam::SharedBackend {
    let store = strata.backend();
    let start = chrono::DateTime::parse_from_rfc3339("2024-05-01T08:00:00Z").unwrap().to_utc();
    let add = |key: &str, persona: &str, texts: &[&str]| {
        let session = store.session(key, persona).unwrap();
        let messages: Vec<NewMessage> = texts
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mut message =
                    NewMessage::text(if i % 2 == 0 { Role::User } else { Role::Assistant }, *text);
                message.created_at = start + chrono::Duration::hours(i as i64);
                message.token_count = 8;
                message
            })
            .collect();
        store.append(session.id, &messages).unwrap();
        session
    };
    let billing = add(
        "billing",
        "coder",
        &[
            "The invoice export crashes on VAT numbers with spaces.",
            "What a merge conflict mess, I had to redo the whole branch.",
            "Fixed: strip spaces before validating the VAT number.",
            "Deploy the billing service after lunch.",
        ],
    );
    add("infra", "coder", &["The staging cluster runs out of disk every Friday.", "Rotate the logs daily."]);
    add(
        "kitchen",
        "chef",
        &["The VAT on restaurant invoices is 10 percent.", "Braise the short ribs for four hours."],
    );
    store
        .insert_leaf(
            billing.id,
            0,
            1,
            &NewSummary {
                headline: "VAT export crash and a painful merge.".into(),
                body: "- bug: VAT numbers with spaces".into(),
                token_count: 9,
                summarizer: "extractive".into(),
                memory_updates: Vec::new(),
            },
        )
        .unwrap();
    store
}

#[test]
fn grep_filters_by_persona_session_limit_and_time() {
    let strata = Strata::new();
    populated(&strata);
    // Two personas: the user must choose.
    let error = strata.run(&["grep", "VAT"]).failure();
    assert!(error.contains("several personas") && error.contains("--persona"), "{error}");

    let all = strata.run(&["grep", "VAT", "--persona", "coder", "--json"]).json();
    assert_eq!(all["count"], 3, "{all:#}"); // 2 messages + 1 summary
    for hit in all["results"].as_array().unwrap() {
        for field in ["kind", "id", "session", "timestamp", "role", "snippet"] {
            assert!(hit.get(field).is_some(), "{field} missing: {hit}");
        }
        assert_ne!(hit["session"], "kitchen");
    }
    assert_eq!(
        strata.run(&["grep", "VAT", "--persona", "coder", "--limit", "2", "--json"]).json()["count"],
        2
    );
    assert_eq!(strata.run(&["grep", "VAT", "--persona", "chef", "--json"]).json()["count"], 1);
    assert_eq!(strata.run(&["grep", "disk", "--session", "infra", "--json"]).json()["count"], 1);
    assert_eq!(strata.run(&["grep", "VAT", "--session", "infra", "--json"]).json()["count"], 0);
    let error = strata.run(&["grep", "VAT", "--session", "kitchen", "--persona", "coder"]).failure();
    assert!(error.contains("belongs to persona"), "{error}");
    let timed = strata
        .run(&[
            "grep",
            "VAT",
            "--persona",
            "coder",
            "--start",
            "2024-05-01T09:00:00Z",
            "--end",
            "2024-05-01T11:00:00Z",
            "--json",
        ])
        .json();
    assert_eq!(timed["count"], 2, "{timed:#}"); // the 09:00 summary end and the 10:00 fix
    let text = strata.run(&["grep", "merge conflict", "--persona", "coder"]).success();
    assert!(text.contains("billing#1") && text.contains("«merge» «conflict»"), "{text}");
    // A bare `*` lists what was said: the newest first, or a time range oldest first.
    let newest = strata.run(&["grep", "*", "--persona", "coder", "--json"]).json();
    assert_eq!(newest["order"], "newest first", "{newest:#}");
    let times = timestamps(&newest);
    assert!(!times.is_empty() && times.windows(2).all(|pair| pair[0] >= pair[1]), "{times:?}");
    let window = strata
        .run(&[
            "grep",
            "*",
            "--persona",
            "coder",
            "--start",
            "2024-05-01T09:00:00Z",
            "--end",
            "2024-05-01T11:00:00Z",
            "--json",
        ])
        .json();
    assert_eq!(window["order"], "oldest first within the time range", "{window:#}");
    let times = timestamps(&window);
    assert!(!times.is_empty() && times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
    assert!(
        times.iter().all(|time| ("2024-05-01T09:00:00".."2024-05-01T11:00:00").contains(&&time[..19])),
        "{times:?}"
    );
    let error = strata.run(&["grep", "\"\"", "--persona", "coder"]).failure();
    assert!(error.contains("no searchable text"), "{error}");
}

#[test]
fn view_shows_neighbours_and_the_covering_summary_and_expand_drills_down() {
    let strata = Strata::new();
    populated(&strata);
    let view = strata.run(&["view", "2", "--json"]).json();
    assert_eq!(view["content"], "What a merge conflict mess, I had to redo the whole branch.");
    assert_eq!(view["session"], "billing");
    assert_eq!(view["before"].as_array().unwrap().len(), 1);
    assert_eq!(view["after"].as_array().unwrap().len(), 2);
    assert_eq!(view["covering_summary"]["id"], 1);
    assert_eq!(view["covering_summary"]["headline"], "VAT export crash and a painful merge.");
    let text = strata.run(&["view", "2"]).success();
    assert!(text.contains("covered by summary node 1") && text.contains("#0 user"), "{text}");
    assert!(strata.run(&["view", "999"]).failure().contains("not found"));

    let expand = strata.run(&["expand", "1", "--json"]).json();
    assert_eq!(expand["total_messages"], 2);
    assert_eq!(expand["messages"].as_array().unwrap().len(), 2);
    let paged = strata.run(&["expand", "1", "--limit", "1", "--json"]).json();
    assert_eq!(paged["messages"].as_array().unwrap().len(), 1);
    assert_eq!(paged["next_offset"], 1);
    let second = strata.run(&["expand", "1", "--limit", "1", "--offset", "1", "--json"]).json();
    assert_eq!(second["messages"][0]["seq"], 1);
    assert!(second["next_offset"].is_null());
    // Another persona's node is not found.
    assert!(strata.run(&["expand", "1", "--persona", "chef"]).failure().contains("not found"));
}

#[test]
fn search_embed_and_a_missing_model() {
    let strata = Strata::new();
    let store = populated(&strata);
    let embedded = strata.run(&["embed", "--persona", "coder", "--json"]).json();
    assert_eq!(embedded["embedded"], 7); // 6 messages + 1 summary
    assert_eq!(embedded["remaining"], 0);
    assert_eq!(store.backlog_count(None, None).unwrap(), 2); // the chef's rows wait
    let found =
        strata.run(&["search", "the rebase blew up", "--persona", "coder", "--limit", "3", "--json"]).json();
    assert_eq!(found["results"][0]["id"], 2, "{found:#}");
    assert!(found["results"][0]["score"].as_f64().unwrap() > 0.0);
    assert_eq!(strata.run(&["embed", "--session", "kitchen", "--json"]).json()["embedded"], 2);
    let text = strata.run(&["search", "kitchen taxes", "--persona", "chef"]).success();
    assert!(text.contains("[message 7]"), "{text}");

    let empty = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let output = strata.command().args(args).env("STRATA_EMBED_ASSETS", empty.path()).output().unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (ok, stderr) = run(&["search", "VAT", "--persona", "coder"]);
    assert!(
        !ok && stderr.contains("semantic search unavailable") && !stderr.contains("panicked"),
        "{stderr}"
    );
    let (ok, stderr) = run(&["embed"]);
    assert!(
        !ok && stderr.contains("semantic search unavailable") && stderr.contains("fetch-embed-assets.sh"),
        "{stderr}"
    );
    let (ok, stderr) = run(&["grep", "VAT", "--persona", "coder"]);
    assert!(ok, "{stderr}");
}

#[test]
fn embed_killed_mid_batch_resumes_and_embeds_everything_exactly_once() {
    let strata = Strata::new();
    let store = strata.backend();
    let session = store.session("long", "p").unwrap();
    let total = 400u64;
    let messages: Vec<NewMessage> = (0..total)
        .map(|i| {
            NewMessage::text(
                Role::User,
                format!("Log line {i}: the worker processed batch {} of the nightly import.", i * 7),
            )
        })
        .collect();
    store.append(session.id, &messages).unwrap();

    let mut child = strata
        .command()
        .args(["embed", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first batches are committed, then kill -9 (most of the time is spent inside
    // a batch, so the kill lands mid-batch).
    let deadline = Instant::now() + Duration::from_secs(120);
    let before_kill = loop {
        let done = strata.message_vectors();
        if done > 0 {
            break done;
        }
        assert!(child.try_wait().unwrap().is_none(), "strata embed exited before it was killed");
        assert!(Instant::now() < deadline, "strata embed made no progress");
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = strata.message_vectors();
    assert!(at_kill >= before_kill && at_kill < total, "killed too late: {at_kill} of {total}");
    // Nothing lost, nothing doubled: every row is either stored or still waiting.
    assert_eq!(at_kill + store.backlog_count(None, None).unwrap(), total);

    let resumed = strata.run(&["embed", "--json"]).json();
    assert_eq!(resumed["embedded"].as_u64().unwrap(), total - at_kill, "{resumed}");
    assert_eq!(strata.message_vectors(), total);
    assert_eq!(store.backlog_count(None, None).unwrap(), 0);
    assert_eq!(strata.run(&["embed", "--json"]).json()["embedded"], 0);
}

#[test]
fn memory_purge_removes_only_expired_memories() {
    let strata = Strata::new();
    strata.run(&["memory", "set", "user_preferences", "tone", "Be brief.", "--persona", "p"]).success();
    strata.run(&["memory", "set", "memo", "note", "Keep.", "--persona", "p"]).success();
    // Default TTLs: nothing is old enough.
    let purged = strata.run(&["memory", "purge", "--json"]).json();
    assert_eq!(purged["purged"]["user_preferences"], 0);
    // A zero-day TTL for memos (through the config's environment override) expires the memo.
    let output = strata
        .command()
        .args(["memory", "purge", "--json"])
        .env("STRATA_RECALL_MEMORY_TTLS_MEMO", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let purged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(purged["purged"]["memo"], 1, "{purged}");
    let list = strata.run(&["memory", "list", "--persona", "p", "--json"]).json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["key"], "tone");
}

/// The `timestamp` of each result of a search answer, in order.
fn timestamps(answer: &serde_json::Value) -> Vec<&str> {
    answer["results"].as_array().unwrap().iter().map(|hit| hit["timestamp"].as_str().unwrap()).collect()
}

#[test]
fn ingest_embed_stores_then_embeds_and_reports_the_rate() {
    let strata = Strata::new();
    let file = strata.file(
        "chat.jsonl",
        "{\"role\": \"user\", \"content\": \"The staging password rotates every 45 days.\"}\n\
         {\"role\": \"assistant\", \"content\": \"Noted, I will not hard-code it.\"}\n\
         {\"role\": \"user\", \"content\": \"The rebase blew up on the lock file.\"}\n",
    );
    let file = file.display().to_string();
    // Without the model nothing is written: the model is loaded first.
    let empty = tempfile::tempdir().unwrap();
    let output = strata
        .command()
        .args(["ingest", &file, "--persona", "p", "--embed"])
        .env("STRATA_EMBED_ASSETS", empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("--embed") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(!strata.db().exists() || strata.backend().stats().unwrap().messages == 0);

    let output =
        strata.command().args(["ingest", &file, "--persona", "p", "--embed", "--json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((report["messages"].as_u64(), report["embedded"].as_u64()), (Some(3), Some(3)), "{report}");
    // No terminal here: the progress comes as lines with the rate and the time left.
    assert!(stderr.contains("3/3 rows") && stderr.contains("rows/s") && stderr.contains("left"), "{stderr}");
    assert_eq!(strata.message_vectors(), 3);
    assert_eq!(strata.backend().backlog_count(None, None).unwrap(), 0);
    let found =
        strata.run(&["search", "how often does the password change", "--persona", "p", "--json"]).json();
    assert_eq!(found["results"][0]["id"], 1, "{found:#}");

    let text = strata.run(&["embed"]).success();
    assert!(text.starts_with("embedded 0 rows in ") && text.contains("rows/s"), "{text}");
}
