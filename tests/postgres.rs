//! The engine and the command line on PostgreSQL (the server `make test` starts): the main
//! job runs on it as on SQLite, the engine's compaction, context and tools give the same
//! answers on both backends, and the commands only SQLite has say so and change nothing.

use serde_json::json;
use strata::compactor::Outcome;
use strata::{ChatMessage, Engine};

#[path = "../crates/pg/tests/common/mod.rs"]
pub(crate) mod common;

use crate::util::{Strata, folding};

#[test]
fn the_demo_runs_on_postgresql() {
    let strata = Strata::new();
    let (url, _database) = common::scratch_database();
    let db = std::path::Path::new(&url);
    let out = strata.run_on(db, &["demo", "--messages", "260"]).success();
    for expected in [
        "[1/4] stored",
        "[2/4] compacted (extractive summarizer)",
        "[3/4] embedded",
        "[4/4] assembled the context",
        "fix        in the context verbatim? yes",
        "▸ memory_grep",
        "refused: user_preferences are read-only",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    let search = out.split("▸ memory_search").nth(1).unwrap().split("▸ view_message").next().unwrap();
    assert!(search.contains("rotates every 45 days"), "{search}");
    assert!(!out.contains(":postgres@"), "the password is shown: {out}");
    // The read commands find what the demo stored, and the checks pass.
    let grep = strata.run_on(db, &["grep", "max_retries"]).success();
    assert!(grep.contains("«max_retries» = 3"), "{grep}");
    let doctor = strata.run_on(db, &["doctor"]).success();
    assert!(doctor.contains("ok  no two Level-0 nodes overlap"), "{doctor}");
    let stats = strata.run_on(db, &["--json", "stats"]).json();
    assert!(stats["messages"].as_u64().unwrap() >= 260, "{stats}");
    assert!(stats["nodes_per_level"][0].as_u64().unwrap() > 0, "{stats}");
    // A command only SQLite has is one clear error.
    let error = strata.run_on(db, &["restore", "backup.db"]).failure();
    assert!(error.contains("needs a SQLite database"), "{error}");
    // Running the demo again is refused, not duplicated.
    let again = strata.run_on(db, &["demo", "--messages", "260"]).failure();
    assert!(again.contains("already holds the demo"), "{again}");
}

/// What one backend answered, to compare with the other's.
#[derive(Debug, PartialEq)]
struct Answers {
    nodes: Vec<(u32, i64, i64)>,
    context_tokens: u32,
    grep_hits: Vec<String>,
    viewed: String,
    expanded_sources: usize,
    saved: bool,
    refused: String,
    memories: usize,
}

fn run_engine(location: &std::path::Path) -> Answers {
    let engine = Engine::open(location, folding()).unwrap();
    let session = engine.session("chat-1", "assistant").unwrap();
    session.append(ChatMessage::user("Hello!")).unwrap();
    session.append(ChatMessage::assistant("Hello, how can I help?")).unwrap();
    session.append(ChatMessage::user("Note for later: the staging database listens on port 5433.")).unwrap();
    session.append(ChatMessage::assistant("Noted: staging's database is on port 5433.")).unwrap();
    for round in 0..6 {
        session
            .append(ChatMessage::user(format!("Round {round}: shall we rename the review meeting?")))
            .unwrap();
        session
            .append(ChatMessage::assistant(format!("Round {round}: let us keep its name for now.")))
            .unwrap();
    }
    // The context's recalled block words what semantic search covers, and a model still
    // loading covers nothing: embedded first, both backends assemble from the same state.
    assert_eq!(engine.embed_pending().unwrap(), 16);
    let runtime = strata::blocking::runtime().unwrap();
    // The first request compacts, and the background embedder races the block's search for
    // the new summaries and memories; the second assembles after the worker is idle and
    // everything is embedded, from the same state (a batch the worker held while
    // `embed_pending` ran was still being written: 696 against 690 tokens in a rehearsal).
    runtime.block_on(session.prepare_context()).unwrap();
    assert!(engine.wait_embedded(std::time::Duration::from_secs(120)), "the worker went idle");
    engine.embed_pending().unwrap();
    let prepared = runtime.block_on(session.prepare_context()).unwrap();
    let nodes = engine
        .store()
        .nodes(session.id())
        .unwrap()
        .into_iter()
        .map(|node| (node.level.0, node.first_seq, node.last_seq))
        .collect();
    let grep = runtime.block_on(session.call_tool("memory_grep", json!({"query": "port 5433"})));
    // Both backends number rows from 1, so the same conversation gets the same ids.
    let mut grep_hits: Vec<String> = grep["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| format!("{} {}", hit["kind"], hit["id"]))
        .collect();
    grep_hits.sort();
    let first = engine.store().messages(session.id(), 2..=2).unwrap().remove(0);
    let viewed = runtime.block_on(session.call_tool("view_message", json!({"message_id": first.id.0})));
    let node = first.summary_id.expect("the fact is folded into a summary");
    let expanded = runtime.block_on(session.call_tool("expand_summary", json!({"node_id": node.0})));
    let saved = runtime.block_on(session.call_tool(
        "save_memory",
        json!({"category": "memo", "key": "staging_port", "title": "Staging port", "content": "5433"}),
    ));
    let refused = runtime.block_on(session.call_tool(
        "save_memory",
        json!({"category": "user_preferences", "key": "tone", "title": "Tone", "content": "terse"}),
    ));
    Answers {
        nodes,
        context_tokens: prepared.context.tokens.total,
        grep_hits,
        viewed: viewed["message"]["content"].as_str().unwrap_or_default().to_owned(),
        expanded_sources: expanded["messages"].as_array().map_or(0, Vec::len),
        saved: saved.get("error").is_none(),
        refused: refused["error"]["kind"].as_str().unwrap_or_default().to_owned(),
        memories: engine.store().memories("assistant", None).unwrap().len(),
    }
}

#[test]
fn the_engine_answers_alike_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = run_engine(&dir.path().join("strata.db"));
    let (url, _database) = common::scratch_database();
    let postgres = run_engine(std::path::Path::new(&url));
    assert!(!sqlite.nodes.is_empty(), "nothing was folded: {sqlite:?}");
    assert!(sqlite.grep_hits.len() >= 2, "{sqlite:?}");
    assert!(sqlite.viewed.contains("5433"), "{sqlite:?}");
    assert!(sqlite.expanded_sources > 0 && sqlite.saved, "{sqlite:?}");
    assert_eq!(sqlite.refused, "forbidden");
    assert_eq!(sqlite, postgres);
}

/// A compaction takes the session's lease, so a session another process is compacting is left
/// to it: nothing is written until the lease is given up, on either backend.
#[test]
fn a_compaction_leaves_a_leased_session_to_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _database) = common::scratch_database();
    for location in [dir.path().join("strata.db"), std::path::PathBuf::from(&url)] {
        let engine = Engine::open(&location, folding()).unwrap();
        let session = engine.session("chat-1", "assistant").unwrap();
        let runtime = strata::blocking::runtime().unwrap();
        // A call with nothing to write asks for no lease: held elsewhere, it still says why.
        let held = engine.store().compaction_lease(session.id()).unwrap().expect("a free lease");
        let idle = runtime.block_on(session.prepare_context()).unwrap().outcome;
        assert!(matches!(idle, Some(Outcome::BelowThreshold { .. })), "{location:?}: {idle:?}");
        drop(held);
        for round in 0..8 {
            session
                .append(ChatMessage::user(format!("Round {round}: shall we rename the meeting?")))
                .unwrap();
            session.append(ChatMessage::assistant(format!("Round {round}: let us keep its name."))).unwrap();
        }
        let held = engine.store().compaction_lease(session.id()).unwrap().expect("a free lease");
        runtime.block_on(session.prepare_context()).unwrap();
        assert!(
            engine.store().nodes(session.id()).unwrap().is_empty(),
            "{location:?}: compacted under a lease"
        );
        drop(held);
        runtime.block_on(session.prepare_context()).unwrap();
        assert!(!engine.store().nodes(session.id()).unwrap().is_empty(), "{location:?}: never compacted");
    }
}

/// `strata copy` moves a SQLite file into PostgreSQL exactly (the same counts, the same answers
/// by the same ids), and a copy killed midway is finished by running it again.
#[test]
fn a_copy_into_postgresql_is_exact_and_a_killed_one_finishes_when_run_again() {
    let strata = Strata::new();
    // The demo's session (nodes, vectors, memories), and a bulk of messages to cut a copy in.
    strata.run(&["demo", "--messages", "260"]).success();
    let file = strata.dir().join("week.jsonl");
    strata.run(&["synth", "--messages", "12000", "--out", file.to_str().unwrap()]).success();
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "bulk"]).success();
    // A fact that stopped being true: its dated history goes with it.
    strata.run(&["memory", "set", "memo", "staging_port", "Staging listens on 5432."]).success();
    strata.run(&["memory", "supersede", "memo", "staging_port", "Staging listens on 5433."]).success();
    let (url, _database) = common::scratch_database();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();

    let mut child = strata.command().args(["copy", "--to", &url]).spawn().unwrap();
    let killed = crate::util::kill_when(&mut child, || {
        client.query_one("SELECT count(*) FROM messages", &[]).is_ok_and(|row| row.get::<_, i64>(0) > 2_000)
    });
    assert!(killed, "the copy finished before it could be cut short");
    let copied = strata.run(&["--json", "copy", "--to", &url]).json();
    assert_eq!(copied["same_counts"], true, "{copied}");
    assert_eq!(copied["healthy"], true, "{copied}");
    assert!(copied["vectors"].as_u64().unwrap() > 260, "{copied}");

    let db = std::path::Path::new(&url);
    let mut source = strata.run(&["--json", "stats"]).json();
    let mut copy = strata.run_on(db, &["--json", "stats"]).json();
    for stats in [&mut source, &mut copy] {
        stats.as_object_mut().unwrap().remove("file_bytes");
    }
    assert_eq!(source, copy);
    for command in [
        &["grep", "max_retries", "--persona", "coder"][..],
        &["grep", "the", "--session", "bulk"],
        &["view", "206"],
    ] {
        assert_eq!(strata.run(command).success(), strata.run_on(db, command).success(), "{command:?}");
    }
    // A ranked search finds the same first row and nearly the same ten; the backends' keyword
    // statistics differ a little, so the scores and order of the weak hits may, and the second
    // hop's words (taken from the first hits) can then trade a tenth hit for another.
    let search = ["search", "how often does the staging password change", "--persona", "coder"];
    let found = |out: String| {
        let mut ids: Vec<String> = out
            .lines()
            .filter(|line| line.starts_with('['))
            .map(|line| line[..line.find(']').unwrap()].to_owned())
            .collect();
        let first = ids.first().cloned();
        ids.sort();
        (first, ids)
    };
    let alike = |target: &std::path::Path| {
        let ((first, ids), (copy_first, copy_ids)) =
            (found(strata.run(&search).success()), found(strata.run_on(target, &search).success()));
        assert_eq!(first, copy_first, "{target:?}");
        let shared = ids.iter().filter(|id| copy_ids.contains(id)).count();
        assert!(ids.len() == 10 && shared >= 9, "{target:?}: {ids:?} against {copy_ids:?}");
    };
    alike(db);

    // Back out of PostgreSQL, as a fleet's backup: into a new SQLite file (one snapshot, one
    // transaction) and into another PostgreSQL database (`strata backup` is the first), each
    // the same database as the file the copy started from.
    let back = strata.dir().join("back.db");
    let (other_url, _other) = common::scratch_database();
    let to_file = strata.run_on(db, &["--json", "backup", back.to_str().unwrap()]).json();
    assert_eq!(
        (to_file["same_counts"].clone(), to_file["healthy"].clone()),
        (json!(true), json!(true)),
        "{to_file}"
    );
    let to_pg = strata.run_on(db, &["--json", "copy", "--to", &other_url]).json();
    assert_eq!(
        (to_pg["same_counts"].clone(), to_pg["healthy"].clone()),
        (json!(true), json!(true)),
        "{to_pg}"
    );
    for target in [back.as_path(), std::path::Path::new(&other_url)] {
        let mut stats = strata.run_on(target, &["--json", "stats"]).json();
        stats.as_object_mut().unwrap().remove("file_bytes");
        assert_eq!(stats, source, "{target:?}");
        for command in
            [&["grep", "max_retries", "--persona", "coder"][..], &["view", "206"], &["memory", "list"]]
        {
            assert_eq!(
                strata.run(command).success(),
                strata.run_on(target, command).success(),
                "{command:?}"
            );
        }
        alike(target);
        let doctor = strata.run_on(target, &["doctor"]).success();
        assert!(!doctor.contains("problems"), "{doctor}");
    }
    // A file copy goes only into a new file.
    let refused = strata.run_on(db, &["copy", "--to", back.to_str().unwrap()]).failure();
    assert!(refused.contains("exists"), "{refused}");

    // A second run finds nothing left to do; another file's copy is refused.
    assert_eq!(strata.run(&["--json", "copy", "--to", &url]).json(), copied);
    let other = Strata::new();
    other.run(&["memory", "set", "memo", "k", "a note"]).success();
    let refused = other.run(&["copy", "--to", &url]).failure();
    assert!(refused.contains("holds a copy of"), "{refused}");
}

/// Issue 42 #8: a `resummarize` killed after writing its last node leaves that node's facts
/// queued; the documented re-run, which finds every node done, settles them, on both backends.
#[test]
fn a_resummarize_rerun_settles_the_facts_a_killed_run_left_queued() {
    use strata::seam::memories::MemoryUpdate;
    use strata::seam::{Category, NewSummary};
    let dir = tempfile::tempdir().unwrap();
    let (url, _database) = common::scratch_database();
    for location in [dir.path().join("strata.db"), std::path::PathBuf::from(&url)] {
        let engine = strata::blocking::Engine::open(&location, folding()).unwrap();
        let session = engine.session("history", "assistant").unwrap();
        for turn in 0..40 {
            session.append(ChatMessage::user(format!("Turn {turn}: shall we move service {turn}?"))).unwrap();
            session
                .append(ChatMessage::assistant(format!("Turn {turn}: yes, service {turn} moved.")))
                .unwrap();
        }
        session.prepare_context().unwrap();
        session.finish_compaction();
        let nodes = engine.store().nodes(session.id()).unwrap();
        let last = nodes.last().expect("the history was folded");
        // What the killed run left: its last node written by the summarizer it ran (this
        // engine's), the node's fact queued with it, nothing settled.
        let fact = MemoryUpdate {
            category: Category::Memo,
            key: "deploy_window".into(),
            title: "Deploy window".into(),
            content: "Deploys go out on Thursdays after 14:00.".into(),
            edit: None,
        };
        let summary = NewSummary {
            headline: "Services moved.".into(),
            body: "- moved".into(),
            token_count: 4,
            summarizer: last.summarizer.clone(),
            memory_updates: vec![fact],
        };
        engine.store().replace_summary(last.id, &last.summarizer, &summary).unwrap();
        assert!(engine.store().memory("assistant", Category::Memo, "deploy_window").unwrap().is_none());
        let again = engine.resummarize(session.id(), None, |_| {}).unwrap();
        assert_eq!(again.replaced, 0, "{location:?}: every node was done");
        let settled = engine.store().memory("assistant", Category::Memo, "deploy_window").unwrap();
        assert!(settled.is_some_and(|memory| memory.content.contains("Thursdays")), "{location:?}");
    }
}

/// A bot's async code uses the engine on PostgreSQL as on SQLite: opening, appending and
/// dropping it on a runtime's thread (where the synchronous client cannot start its own
/// runtime), on both kinds of tokio runtime.
#[test]
fn the_async_engine_runs_on_postgresql_inside_either_kind_of_runtime() {
    let (url, _database) = common::scratch_database();
    for runtime in [
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap(),
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
    ] {
        runtime.block_on(async {
            let engine = Engine::open(&url, folding()).unwrap();
            let session = engine.session("async-bot", "assistant").unwrap();
            for turn in 0..30 {
                session.append(ChatMessage::user(format!("Turn {turn}: is port {turn} open?"))).unwrap();
                session.append(ChatMessage::assistant(format!("Turn {turn}: port {turn} is open."))).unwrap();
            }
            let context = session.prepare_context().await.unwrap();
            assert!(!context.messages().is_empty());
            drop(session);
            drop(engine);
        });
    }
    let engine = strata::blocking::Engine::open(std::path::Path::new(&url), folding()).unwrap();
    let session = engine.session("async-bot", "assistant").unwrap();
    let stored = engine.store().messages(session.id(), 0..=i64::MAX).unwrap();
    assert_eq!(stored.len(), 120, "both runtimes' appends are stored");
}
