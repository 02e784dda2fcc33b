//! The foundation commands: init, ingest, stats, view, memory.

use crate::util::Strata;

fn line(role: &str, content: &str, minute: u32) -> String {
    serde_json::json!({"role": role, "content": content, "timestamp": format!("2026-03-01T10:{minute:02}:00Z")})
        .to_string()
}

fn transcript(n: u32) -> String {
    (0..n)
        .map(|i| {
            line(if i % 2 == 0 { "user" } else { "assistant" }, &format!("message number {i}"), i % 60) + "\n"
        })
        .collect()
}

#[test]
fn ingest_then_view_and_stats() {
    let strata = Strata::new();
    let file = strata.file("chat.jsonl", &transcript(6));
    let out =
        strata.run(&["ingest", file.to_str().unwrap(), "--session", "s1", "--persona", "coder"]).success();
    assert!(out.contains("ingested 6 messages"), "{out}");

    let stats = strata.run(&["stats", "--json"]).json();
    assert_eq!(stats["messages"], 6);
    assert_eq!(stats["sessions"], 1);
    assert!(stats["message_tokens"].as_u64().unwrap() > 6 * 4);

    let view = strata.run(&["view", "3", "--json"]).json();
    for field in ["id", "session", "seq", "role", "timestamp"] {
        assert!(view.get(field).is_some(), "view lacks {field}: {view}");
    }
    assert_eq!(view["session"], "s1");
    assert_eq!(view["seq"], 2);
    assert_eq!(view["role"], "user");
    assert_eq!(view["timestamp"], "2026-03-01T10:02:00Z");
    assert_eq!(view["content"], "message number 2");
}

#[test]
fn sessions_and_tool_calls_come_from_the_lines() {
    let strata = Strata::new();
    let lines = [
        serde_json::json!({"role": "user", "content": "a", "session": "x"}),
        serde_json::json!({"role": "assistant", "content": null, "session": "x",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
        serde_json::json!({"role": "tool", "content": "result", "session": "x", "tool_call_id": "c1", "name": "f"}),
        serde_json::json!({"role": "user", "content": "b", "session": "y"}),
    ];
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    let file = strata.file("multi.jsonl", &text);
    strata.run(&["ingest", file.to_str().unwrap()]).success();
    assert_eq!(strata.run(&["stats", "--json"]).json()["sessions"], 2);
    let tool = strata.run(&["view", "3", "--json"]).json();
    assert_eq!(tool["tool_call_id"], "c1");
    assert_eq!(tool["seq"], 2);
    let y = strata.run(&["view", "4", "--json"]).json();
    assert_eq!((y["session"].as_str(), y["seq"].as_i64()), (Some("y"), Some(0)));
}

#[test]
fn malformed_line_7_leaves_the_database_unchanged() {
    let strata = Strata::new();
    let good = strata.file("good.jsonl", &transcript(4));
    strata.run(&["ingest", good.to_str().unwrap()]).success();
    let before = strata.run(&["stats", "--json"]).json();

    let mut lines: Vec<String> = transcript(10).lines().map(str::to_owned).collect();
    lines[6] = "{\"role\": \"user\", \"content\": \"unterminated".to_owned();
    let bad = strata.file("bad.jsonl", &(lines.join("\n") + "\n"));
    let error = strata.run(&["ingest", bad.to_str().unwrap()]).failure();
    assert!(error.contains("line 7"), "{error}");
    assert_eq!(strata.run(&["stats", "--json"]).json(), before);
}

#[test]
fn bad_input_gets_one_clear_line() {
    let strata = Strata::new();
    strata.run(&["init"]).success();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["ingest".into(), strata.dir().join("nope.jsonl").to_string_lossy().into()], "cannot read"),
        (
            vec![
                "ingest".into(),
                strata.file("role.jsonl", &line("robot", "hi", 0)).to_string_lossy().into(),
            ],
            "robot",
        ),
        (
            vec![
                "ingest".into(),
                strata
                    .file("time.jsonl", "{\"role\":\"user\",\"content\":\"x\",\"timestamp\":\"yesterday\"}\n")
                    .to_string_lossy()
                    .into(),
            ],
            "RFC 3339",
        ),
        (
            vec![
                "ingest".into(),
                strata.file("nocontent.jsonl", "{\"role\":\"user\"}\n").to_string_lossy().into(),
            ],
            "content",
        ),
        (vec!["view".into(), "999".into()], "message 999 not found"),
        (vec!["memory".into(), "get".into(), "memo".into(), "nothing".into()], "no memo memory"),
        (vec!["memory".into(), "set".into(), "memo".into(), "k".into(), "x".repeat(600)], "at most 500"),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let error = strata.run(&args).failure();
        assert!(error.contains(expected), "{args:?}: {error}");
    }
    assert_eq!(strata.run(&["stats", "--json"]).json()["messages"], 0);
}

#[test]
fn newer_database_is_refused() {
    let strata = Strata::new();
    strata.run(&["init"]).success();
    let conn = rusqlite::Connection::open(strata.db()).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let error = strata.run(&["stats"]).failure();
    assert!(error.contains("newer than this strata supports"), "{error}");
}

#[test]
fn locked_database_times_out_with_a_clear_error() {
    let strata = Strata::new();
    strata.run(&["init"]).success();
    let file = strata.file("chat.jsonl", &transcript(2));
    let conn = rusqlite::Connection::open(strata.db()).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO sessions(key, role, created_at, last_active_at) VALUES ('lock', 'p', 0, 0);")
        .unwrap();
    let error = strata.run(&["--busy-timeout-ms", "200", "ingest", file.to_str().unwrap()]).failure();
    assert!(error.contains("locked"), "{error}");
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(strata.run(&["stats", "--json"]).json()["messages"], 0);
}

#[test]
fn not_a_database_is_refused() {
    let strata = Strata::new();
    std::fs::write(strata.db(), "plain text, not a database, long enough to fill a header.......").unwrap();
    let error = strata.run(&["stats"]).failure();
    assert!(error.contains("not a strata database"), "{error}");
}

#[test]
fn memory_commands_round_trip() {
    let strata = Strata::new();
    strata
        .run(&[
            "memory",
            "set",
            "user_preferences",
            "Preferred Editor",
            "Helix",
            "--title",
            "Editor",
            "--persona",
            "p",
        ])
        .success();
    let memory = strata
        .run(&["memory", "get", "user_preferences", "preferred_editor", "--persona", "p", "--json"])
        .json();
    assert_eq!(memory["content"], "Helix");
    assert_eq!(memory["title"], "Editor");
    assert_eq!(strata.run(&["memory", "list", "--persona", "other", "--json"]).json(), serde_json::json!([]));
    assert_eq!(
        strata.run(&["memory", "list", "--persona", "p", "--json"]).json().as_array().unwrap().len(),
        1
    );
    strata.run(&["memory", "delete", "user_preferences", "preferred_editor", "--persona", "p"]).success();
    strata.run(&["memory", "delete", "user_preferences", "preferred_editor", "--persona", "p"]).failure();
}

/// Unknown keys are kept (a provider's own fields go back to it), and a misspelled "sesion"
/// is visibly one of them: exported as the message's field, never taken for the session. A
/// byte-order mark was reported as "expected value at line 1 column 1".
#[test]
fn unknown_keys_are_kept_and_a_byte_order_mark_is_skipped() {
    let strata = Strata::new();
    let typo = strata.file("typo.jsonl", "{\"role\": \"user\", \"content\": \"hi\"}\n{\"role\": \"user\", \"content\": \"x\", \"sesion\": \"s2\"}\n");
    strata.run(&["ingest", typo.to_str().unwrap()]).success();
    assert_eq!(strata.run(&["stats", "--json"]).json()["messages"], 2);
    let exported =
        strata.run(&["export", "--format", "jsonl", "--persona", "default", "--out", "-"]).success();
    let line: serde_json::Value = serde_json::from_str(exported.lines().nth(1).unwrap()).unwrap();
    assert_eq!(line["message"]["sesion"], "s2", "{exported}");
    assert_eq!(line["session"], "default", "{exported}");

    let bom = strata.file("bom.jsonl", "\u{feff}{\"role\": \"user\", \"content\": \"with a BOM\"}\n");
    strata.run(&["ingest", bom.to_str().unwrap()]).success();
    assert_eq!(strata.run(&["stats", "--json"]).json()["messages"], 3);
}

/// Regression: `strata grep` on another program's SQLite file added 36 tables and switched it
/// to WAL; on a mistyped path it created an empty database and answered "no matches".
#[test]
fn other_programs_databases_and_missing_files_are_left_alone() {
    let strata = Strata::new();
    let foreign = strata.file("other.db", "");
    std::fs::remove_file(&foreign).unwrap();
    {
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
            .unwrap();
    }
    let before = std::fs::read(&foreign).unwrap();
    for args in [vec!["grep", "acme"], vec!["ingest", "-"], vec!["stats"]] {
        let error = strata.run_on(&foreign, &args).failure();
        assert!(error.contains("not strata's"), "{error}");
    }
    assert_eq!(std::fs::read(&foreign).unwrap(), before, "the file is byte for byte unchanged");
    assert!(!foreign.with_extension("db-wal").exists());

    let missing = foreign.with_file_name("typo.db");
    for args in [vec!["grep", "foo"], vec!["stats"], vec!["view", "1"]] {
        let error = strata.run_on(&missing, &args).failure();
        assert!(error.contains("no database at") && error.contains("strata init"), "{error}");
    }
    assert!(!missing.exists(), "a read command never creates a database");
    strata.run_on(&missing, &["init"]).success();
    assert!(missing.exists());
}

#[test]
fn re_running_an_ingest_adds_only_new_lines() {
    let strata = Strata::new();
    let file = strata.file("week.jsonl", &transcript(6));
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "s1"]).success();
    // The confirmation was lost (a kill after the commit): the same command again.
    let again = strata.run(&["ingest", file.to_str().unwrap(), "--session", "s1"]).success();
    assert!(again.contains("ingested 0 messages") && again.contains("skipped 6 lines"), "{again}");
    // The file grew: only its new lines go in.
    let longer = strata.file("week.jsonl", &format!("{}{}\n", transcript(6), line("user", "one more", 59)));
    let json = strata.run(&["ingest", longer.to_str().unwrap(), "--session", "s1", "--json"]).json();
    assert_eq!((json["messages"].as_u64(), json["skipped"].as_u64()), (Some(1), Some(6)));
    let stats = strata.run(&["stats", "--json"]).json();
    assert_eq!(stats["messages"], 7);

    // Lines with an "id" are stored once per session whatever file they come in.
    let ids = strata.file(
        "ids.jsonl",
        "{\"role\":\"user\",\"content\":\"a\",\"id\":\"m1\"}\n{\"role\":\"user\",\"content\":\"b\",\"id\":\"m2\"}\n",
    );
    strata.run(&["ingest", ids.to_str().unwrap(), "--session", "s2"]).success();
    let overlap = strata.file(
        "overlap.jsonl",
        "{\"role\":\"user\",\"content\":\"b\",\"id\":\"m2\"}\n{\"role\":\"user\",\"content\":\"c\",\"id\":\"m3\"}\n",
    );
    let out = strata.run(&["ingest", overlap.to_str().unwrap(), "--session", "s2"]).success();
    assert!(out.contains("ingested 1 messages") && out.contains("skipped 1 lines"), "{out}");
}

#[test]
fn doctor_backup_and_a_damaged_file() {
    let strata = Strata::new();
    let file = strata.file("chat.jsonl", &transcript(400));
    strata.run(&["ingest", file.to_str().unwrap()]).success();
    let report = strata.run(&["doctor", "--json"]).json();
    assert!(report["checks"].as_array().unwrap().iter().all(|c| c["problems"] == 0), "{report}");
    assert_eq!(report["embedding_backlog"], 400);

    // A backup while another process appends: a consistent copy of one committed state.
    let more = strata.file("more.jsonl", &transcript(100));
    let writer = {
        let mut command = strata.command();
        command.args(["ingest", more.to_str().unwrap(), "--session", "other"]);
        std::thread::spawn(move || command.output().unwrap())
    };
    let copy = strata.dir().join("copy.db");
    let out = strata.run(&["backup", copy.to_str().unwrap()]).success();
    assert!(out.contains("checked"), "{out}");
    assert!(writer.join().unwrap().status.success());
    let copied = strata.run_on(&copy, &["stats", "--json"]).json()["messages"].as_u64().unwrap();
    assert!(copied == 400 || copied == 500, "a committed state, not a torn one: {copied}");
    strata.run_on(&copy, &["doctor"]).success();
    let again = strata.run(&["backup", copy.to_str().unwrap()]).failure();
    assert!(again.contains("already exists"), "{again}");

    // Damage the main file: writers refuse it, doctor says what is wrong, both exit non-zero.
    strata.run(&["doctor"]).success();
    let db = strata.db().to_path_buf();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&db).unwrap();
    let pages = bytes.len() / 4096;
    for page in (pages / 2..pages).step_by(5) {
        for byte in &mut bytes[page * 4096 + 8..page * 4096 + 40] {
            *byte ^= 0x5A;
        }
    }
    std::fs::write(&db, &bytes).unwrap();
    let refused = strata.run(&["ingest", more.to_str().unwrap(), "--session", "third"]).failure();
    assert!(refused.contains("damaged") || refused.contains("corrupt"), "{refused}");
    assert_eq!(refused.trim().lines().count(), 1, "one line: {refused}");
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "nothing was written to the damaged file");
    let doctor = strata.run(&["doctor"]).failure();
    assert!(doctor.contains("not healthy") || doctor.contains("corrupt"), "{doctor}");
}

#[test]
fn a_database_keeps_the_token_encoding_it_was_first_counted_with() {
    let strata = Strata::new();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sample.jsonl");
    strata.run(&["ingest", sample, "--session", "s"]).success();
    let store = strata.backend();
    assert_eq!(store.token_encoding().unwrap().as_deref(), Some("o200k_base"), "gpt-4o-mini's");
    let messages = store.stats().unwrap().messages;

    // Another model's encoding is refused before anything is written, by every command that
    // counts: an import, a compaction, an assembly.
    let error = strata.run(&["ingest", sample, "--session", "t", "--model", "gpt-4"]).failure();
    assert!(error.contains("o200k_base") && error.contains("cl100k_base"), "{error}");
    assert_eq!(store.stats().unwrap().messages, messages);
    for args in [["compact", "--session", "s"], ["context", "--session", "s"]] {
        let run = strata.command().args(args).env("STRATA_COMPACTOR_MODEL", "gpt-4").output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && stderr.contains("[compactor] encoding"), "{args:?}: {stderr}");
    }
    // Naming the database's encoding lets another model use it.
    let run = strata
        .command()
        .args(["context", "--session", "s"])
        .env("STRATA_COMPACTOR_MODEL", "gpt-4")
        .env("STRATA_COMPACTOR_ENCODING", "o200k_base")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    // A fresh database records what `strata init` is configured with.
    let other = Strata::new();
    let out = other.command().arg("init").env("STRATA_COMPACTOR_MODEL", "gpt-4").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("cl100k_base"));
    assert_eq!(other.backend().token_encoding().unwrap().as_deref(), Some("cl100k_base"));
}
