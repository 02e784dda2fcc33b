//! The store's contracts: atomic coverage and merges, persona isolation, protected memories,
//! concurrent appends; the schema and its upgrades (`schema.rs`).

mod store {
    mod forget;
    mod schema;
}

use std::sync::{Arc, Barrier};
use std::thread;

use strata_seam::check::Check;
use strata_seam::embeddings::EmbeddingSpace;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::search::{CandidateQuery, HitId, HitKind, Scan, SearchFilter, TextQuery};
use strata_seam::transfer::{IncomingMessage, Source};
use strata_seam::{
    Category, Conversations, Error, Forest, Level, Maintenance, Memories, NewMessage, NewSummary, Role,
    Search, Vectors,
};
use strata_store::Store;

/// The keyword side of a ranked search alone: (id, bm25 score), best first.
fn rank_words(store: &Store, kind: HitKind, words: &[String], filter: &SearchFilter) -> Vec<(HitId, f64)> {
    let query = CandidateQuery {
        filter: SearchFilter { kinds: vec![kind], ..filter.clone() },
        words,
        vector: None,
        scan: Scan::Exact,
        frequency_cap: 1000,
    };
    let mut ranked: Vec<(HitId, f64)> =
        store.candidates(&query).unwrap().keyword.into_iter().map(|(hit, score)| (hit.id, score)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
}

/// The semantic side of a ranked search alone: the `k` nearest rows within the filter's window,
/// (id, cosine distance), nearest first.
fn nearest_within(
    store: &Store,
    kind: HitKind,
    filter: &SearchFilter,
    vector: &[f32],
    k: usize,
    scan: Scan,
) -> Vec<(HitId, f64)> {
    let query = CandidateQuery {
        filter: SearchFilter { kinds: vec![kind], limit: k, ..filter.clone() },
        words: &[],
        vector: Some((MODEL, vector)),
        scan,
        frequency_cap: 1000,
    };
    let mut nearest: Vec<(HitId, f64)> = store
        .candidates(&query)
        .unwrap()
        .semantic
        .into_iter()
        .map(|(hit, distance)| (hit.id, distance))
        .collect();
    nearest.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.raw().cmp(&b.0.raw())));
    nearest
}

fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("strata.db")).unwrap();
    (dir, store)
}

fn summary(headline: &str) -> NewSummary {
    NewSummary {
        headline: headline.to_owned(),
        body: format!("- {headline}"),
        token_count: 10,
        summarizer: "extractive".to_owned(),
        memory_updates: Vec::new(),
    }
}

fn text(role: Role, content: &str) -> NewMessage {
    let mut message = NewMessage::text(role, content);
    message.token_count = content.split_whitespace().count() as u32;
    message
}

fn session_with(store: &Store, key: &str, persona: &str, n: usize) -> strata_seam::Session {
    let session = store.session(key, persona).unwrap();
    let messages: Vec<NewMessage> = (0..n)
        .map(|i| {
            text(if i % 2 == 0 { Role::User } else { Role::Assistant }, &format!("message {i} of {key}"))
        })
        .collect();
    store.append(session.id, &messages).unwrap();
    session
}

#[test]
fn seqs_are_dense_and_ordered() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 5);
    session_with(&store, "s", "p", 3);
    let seqs: Vec<i64> = store.all_messages(session.id).unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..8).collect::<Vec<_>>());
}

#[test]
fn session_key_is_bound_to_its_persona() {
    let (_dir, store) = temp_store();
    store.session("s", "alice").unwrap();
    let err = store.session("s", "bob").unwrap_err();
    assert!(matches!(err, Error::PersonaMismatch { .. }), "{err:?}");
}

#[test]
fn leaf_covers_atomically_and_refuses_overlap() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 10);
    let node = store.insert_leaf(session.id, 0, 3, &summary("first")).unwrap();
    assert_eq!((node.first_seq, node.last_seq, node.level), (0, 3, Level::LEAF));
    assert_eq!(node.source_token_count, 4 * 4);

    let err = store.insert_leaf(session.id, 3, 5, &summary("overlap")).unwrap_err();
    assert!(matches!(err, Error::AlreadyCovered { seq: 3, node: n, .. } if n == node.id), "{err:?}");
    // The refused call changed nothing.
    let messages = store.all_messages(session.id).unwrap();
    assert!(messages[4..].iter().all(|m| m.summary_id.is_none()));
    assert_eq!(store.nodes(session.id).unwrap().len(), 1);

    // Gaps, empty ranges and pinned messages are refused too.
    assert!(store.insert_leaf(session.id, 8, 12, &summary("past the end")).is_err());
    assert!(store.insert_leaf(session.id, 6, 5, &summary("backwards")).is_err());
    store.set_pinned(messages[6].id, true).unwrap();
    assert!(store.insert_leaf(session.id, 5, 7, &summary("pinned inside")).is_err());
    assert!(
        store.insert_leaf(session.id, 4, 4, &NewSummary { headline: " ".into(), ..summary("x") }).is_err()
    );
    assert_eq!(store.nodes(session.id).unwrap().len(), 1);
}

#[test]
fn a_summary_replaced_by_another_writer_is_a_typed_refusal() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 4);
    let node = store
        .insert_leaf(session.id, 0, 3, &NewSummary { summarizer: "raw-archive".into(), ..summary("digest") })
        .unwrap();
    let better = NewSummary { summarizer: "gpt-4o-mini".into(), ..summary("real") };
    store.replace_summary(node.id, "raw-archive", &better).unwrap();
    // The second writer expected the digest: refused without a change, and typed, so the
    // compactor can tell it from a busy or damaged database.
    let err = store.replace_summary(node.id, "raw-archive", &summary("late")).unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyReplaced { node: id, summarizer } if *id == node.id && summarizer == "gpt-4o-mini"),
        "{err}"
    );
    assert_eq!(store.node(node.id).unwrap().headline, "real");
}

#[test]
fn two_threads_racing_for_the_same_messages_one_wins() {
    for _ in 0..5 {
        let (_dir, store) = temp_store();
        let session = session_with(&store, "s", "p", 20);
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let (store, barrier) = (store.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    store.insert_leaf(session.id, 0, 9 + i, &summary(&format!("racer {i}")))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let wins = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "{results:?}");
        let loser = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert!(matches!(loser, Error::AlreadyCovered { .. }), "{loser:?}");
        assert_eq!(store.nodes(session.id).unwrap().len(), 1);
    }
}

#[test]
fn merge_links_children_and_refuses_a_second_parent() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 12);
    let leaves: Vec<_> = (0..4)
        .map(|i| store.insert_leaf(session.id, i * 3, i * 3 + 2, &summary(&format!("leaf {i}"))).unwrap())
        .collect();
    let parent = store.merge(&[leaves[0].id, leaves[1].id], &summary("parent")).unwrap();
    assert_eq!((parent.level, parent.first_seq, parent.last_seq), (Level(1), 0, 5));
    assert_eq!(parent.source_token_count, 20);
    assert_eq!(
        store.children(parent.id).unwrap().iter().map(|n| n.id).collect::<Vec<_>>(),
        [leaves[0].id, leaves[1].id]
    );

    let err = store.merge(&[leaves[1].id, leaves[2].id], &summary("again")).unwrap_err();
    assert!(
        matches!(err, Error::AlreadyMerged { node, parent: p } if node == leaves[1].id && p == parent.id)
    );
    // Not adjacent: leaf 3 is between... (leaf 2 and nothing) — merging 2 with the level-1 node is refused.
    assert!(store.merge(&[leaves[2].id, parent.id], &summary("mixed levels")).is_err());
    assert!(store.merge(&[leaves[3].id], &summary("alone")).is_err());
    let roots: Vec<_> = store.roots(session.id, None).unwrap().iter().map(|n| n.id).collect();
    assert_eq!(roots, [parent.id, leaves[2].id, leaves[3].id]);
}

#[test]
fn node_time_ranges_are_the_min_and_max_of_their_sources_when_time_goes_backwards() {
    let (_dir, store) = temp_store();
    let session = store.session("s", "p").unwrap();
    let base = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z").unwrap().to_utc();
    // A transcript whose clock jumps back an hour in its middle.
    let minutes = [0, 1, 2, -60, -59, -58];
    let messages: Vec<NewMessage> = minutes
        .iter()
        .map(|&m| {
            let mut message = text(Role::User, &format!("at {m}"));
            message.created_at = base + chrono::Duration::minutes(m);
            message
        })
        .collect();
    store.append(session.id, &messages).unwrap();
    let a = store.insert_leaf(session.id, 0, 2, &summary("a")).unwrap();
    let b = store.insert_leaf(session.id, 3, 5, &summary("b")).unwrap();
    let mixed = store.insert_leaf(session.id, 6, 5, &summary("nothing")).map(|_| ());
    assert!(mixed.is_err());
    let parent = store.merge(&[a.id, b.id], &summary("both")).unwrap();
    for node in [&a, &b, &parent] {
        assert!(
            node.start_time <= node.end_time,
            "node {}: {} > {}",
            node.id,
            node.start_time,
            node.end_time
        );
    }
    assert_eq!(parent.start_time, base - chrono::Duration::minutes(60));
    assert_eq!(parent.end_time, base + chrono::Duration::minutes(2));
}

#[test]
fn merge_refuses_roots_that_are_not_adjacent() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 9);
    let leaves: Vec<_> = (0..3)
        .map(|i| store.insert_leaf(session.id, i * 3, i * 3 + 2, &summary(&format!("leaf {i}"))).unwrap())
        .collect();
    let err = store.merge(&[leaves[0].id, leaves[2].id], &summary("gap")).unwrap_err();
    assert!(err.to_string().contains("adjacent"), "{err}");
}

#[test]
fn racing_merges_one_wins() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 12);
    let leaves: Vec<_> = (0..4)
        .map(|i| store.insert_leaf(session.id, i * 3, i * 3 + 2, &summary("leaf")).unwrap().id)
        .collect();
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [vec![leaves[0], leaves[1]], vec![leaves[0], leaves[1]]]
        .into_iter()
        .map(|children| {
            let (store, barrier) = (store.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                store.merge(&children, &summary("parent"))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    assert!(results.iter().any(|r| matches!(r, Err(Error::AlreadyMerged { .. }))));
}

fn remember(
    store: &Store,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
    content: &str,
) -> strata_seam::Result<strata_seam::Memory> {
    store.put_memory(writer, persona, &MemoryWrite { category, key, title: key, content })
}

#[test]
fn agent_cannot_write_user_preferences_but_user_can() {
    let (_dir, store) = temp_store();
    let err = remember(&store, Writer::Agent, "p", Category::UserPreferences, "editor", "vim").unwrap_err();
    assert!(matches!(err, Error::ProtectedCategory), "{err:?}");
    assert!(store.memories("p", None).unwrap().is_empty());

    remember(&store, Writer::User, "p", Category::UserPreferences, "editor", "vim").unwrap();
    let err = store.delete_memory(Writer::Agent, "p", Category::UserPreferences, "editor").unwrap_err();
    assert!(matches!(err, Error::ProtectedCategory));
    assert_eq!(store.memory("p", Category::UserPreferences, "editor").unwrap().unwrap().content, "vim");

    remember(&store, Writer::Agent, "p", Category::Progress, "step", "tests pass").unwrap();
    remember(&store, Writer::Agent, "p", Category::Progress, "step", "tests pass; docs next").unwrap();
    let progress = store.memories("p", Some(Category::Progress)).unwrap();
    assert_eq!(progress.len(), 1, "an upsert, not a second row");
    assert_eq!(progress[0].content, "tests pass; docs next");
    assert!(store.delete_memory(Writer::User, "p", Category::UserPreferences, "editor").unwrap());
}

#[test]
fn memory_rules_are_enforced() {
    let (_dir, store) = temp_store();
    let long = "x".repeat(501);
    let err = remember(&store, Writer::User, "p", Category::Memo, "k", &long).unwrap_err();
    assert!(err.to_string().contains("at most 500"), "{err}");
    let err = remember(&store, Writer::User, "p", Category::Memo, "Not Snake", "x").unwrap_err();
    assert!(err.to_string().contains("not_snake"), "{err}");
    remember(&store, Writer::User, "p", Category::Memo, "k", &"é".repeat(500)).unwrap();
    // Regression: long keys were cut to 64 characters, so two of them overwrote each other.
    let long_key = format!("{}_east", "deployment_checklist".repeat(4));
    let err = remember(&store, Writer::User, "p", Category::Memo, &long_key, "x").unwrap_err();
    assert!(err.to_string().contains("at most 64"), "{err}");
}

#[test]
fn personas_are_isolated_in_listing_and_search() {
    let (_dir, store) = temp_store();
    for persona in ["alice", "bob"] {
        remember(
            &store,
            Writer::User,
            persona,
            Category::UserPreferences,
            "language",
            &format!("Rust for {persona}"),
        )
        .unwrap();
        remember(&store, Writer::Agent, persona, Category::Memo, "deploy_target", "the staging cluster")
            .unwrap();
        let session = store.session(&format!("{persona}-chat"), persona).unwrap();
        store.append(session.id, &[text(Role::User, "deploy to the staging cluster please")]).unwrap();
    }
    for (persona, other) in [("alice", "bob"), ("bob", "alice")] {
        let listed = store.memories(persona, None).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|m| m.persona == persona));

        let hits = store
            .grep(&TextQuery::parse("staging cluster").unwrap(), &SearchFilter::persona(persona))
            .unwrap();
        assert_eq!(hits.len(), 2, "{hits:?}");
        for hit in &hits {
            if let Some(session) = &hit.session {
                assert_eq!(session, &format!("{persona}-chat"));
            } else {
                let memory =
                    store.memory(persona, Category::Memo, hit.key.as_deref().unwrap()).unwrap().unwrap();
                assert_eq!(strata_seam::search::HitId::Memory(memory.id), hit.id);
            }
        }
        let hits = store
            .grep(&TextQuery::parse(&format!("Rust for {other}")).unwrap(), &SearchFilter::persona(persona))
            .unwrap();
        assert!(hits.is_empty(), "{persona} sees {other}: {hits:?}");
        // Guessing ids does not help either.
        let other_message = store.find_session(&format!("{other}-chat")).unwrap().unwrap();
        let other_id = store.all_messages(other_message.id).unwrap()[0].id;
        assert!(matches!(Conversations::message_of(&store, persona, other_id), Err(Error::NotFound(_))));
    }
}

#[test]
fn grep_finds_substrings_cjk_and_short_words() {
    let (_dir, store) = temp_store();
    let session = store.session("s", "p").unwrap();
    store
        .append(
            session.id,
            &[
                text(Role::User, "We hit a MERGE CONFLICT in src/main.rs"),
                text(Role::Assistant, "数据库迁移已经完成"),
                text(Role::User, "go to v2 now"),
            ],
        )
        .unwrap();
    let find = |q: &str| store.grep(&TextQuery::parse(q).unwrap(), &SearchFilter::persona("p")).unwrap();
    assert_eq!(find("merge conflict").len(), 1);
    assert_eq!(find("\"merge conflict\"").len(), 1);
    assert_eq!(find("conflict merge").len(), 1, "words in any order");
    assert_eq!(find("\"conflict merge\"").len(), 0, "a phrase keeps its order");
    assert_eq!(find("merg*").len(), 1);
    assert_eq!(find("迁移").len(), 1, "two-character CJK word");
    assert_eq!(find("数据库迁移").len(), 1);
    assert_eq!(find("v2").len(), 1);
    let hit = &find("conflict")[0];
    assert_eq!(hit.snippet, "We hit a MERGE CONFLICT in src/main.rs", "a hit carries its whole text");
    for hostile in [
        "NEAR(a b)",
        "a OR b",
        "-x",
        "\"",
        "*\"*",
        "'; DROP TABLE messages; --",
        "col:x",
        "^x",
        "(((",
        "%",
        "_",
    ] {
        match TextQuery::parse(hostile) {
            Ok(query) => drop(store.grep(&query, &SearchFilter::persona("p")).unwrap()),
            Err(err) => assert!(matches!(err, Error::Invalid { field: "query", .. }), "{hostile:?}: {err:?}"),
        }
    }
}

#[test]
fn append_many_is_all_or_nothing() {
    let (_dir, store) = temp_store();
    let good = IncomingMessage {
        session_key: "a".into(),
        persona: "p".into(),
        message: text(Role::User, "hi"),
        line_digest: None,
    };
    let mut bad = good.clone();
    bad.session_key = "b".into();
    bad.message.tool_calls = Some(serde_json::json!({"not": "an array"}));
    let err = store.append_many(&[good.clone(), good.clone(), bad]).unwrap_err();
    assert!(err.to_string().contains("tool_calls"), "{err}");
    assert_eq!(store.stats().unwrap().messages, 0);
    assert!(store.find_session("a").unwrap().is_none(), "no half-created session");
}

#[test]
fn append_many_refuses_a_key_seen_earlier_with_another_persona() {
    let (_dir, store) = temp_store();
    let line = |key: &str, persona: &str, text: &str| IncomingMessage {
        session_key: key.into(),
        persona: persona.into(),
        message: NewMessage::text(Role::User, text),
        line_digest: None,
    };
    let err = store
        .append_many(&[
            line("s1", "alice", "a"),
            line("s2", "alice", "b"),
            line("s1", "bob", "bravo secret of bob"),
        ])
        .unwrap_err();
    assert!(matches!(err, Error::PersonaMismatch { .. }), "{err:?}");
    assert_eq!(store.stats().unwrap().messages, 0, "nothing of the file is written");
}

/// A transcript as `strata ingest` reads it: each line's digest kept with its message.
fn transcript(lines: &[(&str, &str)]) -> Vec<IncomingMessage> {
    lines
        .iter()
        .map(|&(session, content)| IncomingMessage {
            session_key: session.into(),
            persona: "p".into(),
            message: text(Role::User, content),
            line_digest: Some(strata_seam::transfer::line_digest(&format!("{session}\t{content}"))),
        })
        .collect()
}

#[test]
fn re_running_an_import_adds_only_what_is_new() {
    let (_dir, store) = temp_store();
    let day_one = transcript(&[("a", "ok"), ("b", "hello b"), ("a", "the port is 8443")]);
    let first = store.append_many(&day_one).unwrap();
    assert_eq!((first.ids.len(), first.skipped), (3, 0));

    // The same file again (its confirmation was lost): nothing is added.
    let again = store.append_many(&day_one).unwrap();
    assert_eq!((again.ids.len(), again.skipped), (0, 3));
    assert_eq!(store.stats().unwrap().messages, 3);

    // A longer version of it: only the new lines.
    let mut longer = day_one.clone();
    longer.extend(transcript(&[("a", "and the host is db-2")]));
    let grown = store.append_many(&longer).unwrap();
    assert_eq!((grown.ids.len(), grown.skipped), (1, 3));
    let a = store.find_session("a").unwrap().unwrap();
    let seqs: Vec<(i64, String)> =
        store.messages(a.id, 0..=10).unwrap().into_iter().map(|m| (m.seq, m.content)).collect();
    assert_eq!(
        seqs,
        [(0, "ok".into()), (1, "the port is 8443".into()), (2, "and the host is db-2".into())],
        "dense seqs, file order, nothing twice"
    );

    // Another file that only starts with the same line is a new conversation: all of it goes in.
    let day_two = transcript(&[("a", "ok"), ("a", "new day")]);
    let other = store.append_many(&day_two).unwrap();
    assert_eq!((other.ids.len(), other.skipped), (2, 0));
}

#[test]
fn an_external_id_makes_an_append_idempotent() {
    let (_dir, store) = temp_store();
    let session = store.session("s", "p").unwrap();
    let mut message = text(Role::User, "deploy at noon");
    message.external_id = Some("bot-msg-17".into());
    let first = store.append(session.id, std::slice::from_ref(&message)).unwrap();
    // The bot timed out and retries: same id back, nothing stored twice.
    let retry = store.append(session.id, &[message.clone(), text(Role::Assistant, "ok")]).unwrap();
    assert_eq!(retry[0], first[0]);
    assert_eq!(store.stats().unwrap().messages, 2);
    assert_eq!(store.message(retry[1]).unwrap().seq, 1, "a skipped message takes no seq");

    // The same key for another message is a bug, refused with nothing written.
    let mut reused = text(Role::User, "something else");
    reused.external_id = Some("bot-msg-17".into());
    let err = store.append(session.id, &[text(Role::User, "x"), reused]).unwrap_err();
    assert!(matches!(err, Error::Invalid { field: "external_id", .. }), "{err:?}");
    assert_eq!(store.stats().unwrap().messages, 2);

    // Keys are per session.
    let other = store.session("t", "p").unwrap();
    let elsewhere = store.append(other.id, &[message]).unwrap();
    assert_ne!(elsewhere[0], first[0]);
}

#[test]
fn eight_threads_append_concurrently_without_busy_or_loss() {
    let (_dir, store) = temp_store();
    let threads = 8;
    let batches = 25;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, barrier) = (store.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                // Two threads per session, so seqs of one session are handed out concurrently.
                let session = store.session(&format!("s{}", t % 4), "p").unwrap();
                for b in 0..batches {
                    let batch: Vec<_> =
                        (0..10).map(|i| text(Role::User, &format!("t{t} b{b} m{i}"))).collect();
                    store.append(session.id, &batch).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(store.stats().unwrap().messages, (threads * batches * 10) as u64);
    for s in 0..4 {
        let session = store.find_session(&format!("s{s}")).unwrap().unwrap();
        let seqs: Vec<i64> = store.all_messages(session.id).unwrap().iter().map(|m| m.seq).collect();
        assert_eq!(seqs, (0..(2 * batches * 10) as i64).collect::<Vec<_>>());
    }
}

#[test]
fn messages_are_append_only_at_the_sql_level() {
    let (dir, store) = temp_store();
    session_with(&store, "s", "p", 2);
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    assert!(conn.execute("DELETE FROM messages", []).is_err());
    assert!(conn.execute("UPDATE messages SET content = 'rewritten'", []).is_err());
}

#[test]
fn not_a_database_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.db");
    std::fs::write(&path, "this is not sqlite, just some text that is long enough to be a header......")
        .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err:?}");
    let err = Store::open(dir.path().join("missing/dir/x.db")).unwrap_err();
    assert!(matches!(err, Error::Open { .. }), "{err:?}");
}

#[test]
fn vectors_are_stored_once_and_searched_per_persona() {
    let (_dir, store) = temp_store();
    session_with(&store, "a", "alice", 2);
    session_with(&store, "b", "bob", 2);
    let backlog = store.backlog(None, None, 100).unwrap();
    assert_eq!(backlog.len(), 4);
    let unit = |i: usize| {
        let mut v = vec![0.0f32; DIMS];
        v[i] = 1.0;
        v
    };
    let items: Vec<_> = backlog.iter().cloned().enumerate().map(|(i, item)| (item, vec![unit(i)])).collect();
    assert!(store.put_vectors(MODEL, &items).is_err(), "no embedding space yet");
    store.use_space(&space()).unwrap();
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 4);
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 0, "already off the backlog");
    assert!(store.backlog(None, None, 100).unwrap().is_empty());
    for scan in [Scan::Exact, Scan::Quantized { candidates: 10 }] {
        let near = store.embeddings().nearest(MODEL, HitKind::Message, "alice", &unit(0), 10, scan).unwrap();
        assert_eq!(near.len(), 2, "only alice's vectors: {near:?}");
        assert_eq!(near[0].0, backlog[0].id);
        assert!(near[0].1.abs() < 1e-6);
    }
    assert!(store.embeddings().nearest(MODEL, HitKind::Message, "alice", &[1.0], 1, Scan::Exact).is_err());
    assert!(
        store
            .embeddings()
            .nearest("other-model", HitKind::Message, "alice", &unit(0), 1, Scan::Exact)
            .unwrap()
            .is_empty()
    );
}

const MODEL: &str = "test-model";
const DIMS: usize = 16;

fn space() -> EmbeddingSpace {
    EmbeddingSpace { model: MODEL.into(), dimensions: DIMS }
}

/// A long text is stored as several chunk vectors; the row is found by its nearest chunk and
/// comes back once.
#[test]
fn chunks_of_one_row_come_back_as_one_row() {
    let (_dir, store) = temp_store();
    session_with(&store, "a", "alice", 2);
    store.use_space(&space()).unwrap();
    let backlog = store.backlog(None, None, 10).unwrap();
    let unit = |i: usize| (0..DIMS).map(|d| if d == i { 1.0 } else { 0.0 }).collect::<Vec<f32>>();
    let items =
        vec![(backlog[0].clone(), vec![unit(0), unit(1), unit(2)]), (backlog[1].clone(), vec![unit(3)])];
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 2);
    assert_eq!(store.embeddings().counts().unwrap().messages, 4);
    let near =
        store.embeddings().nearest(MODEL, HitKind::Message, "alice", &unit(2), 10, Scan::Exact).unwrap();
    assert_eq!(near.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [backlog[0].id, backlog[1].id]);
    assert!(near[0].1.abs() < 1e-6, "the nearest chunk decides: {near:?}");
    let too_many = vec![unit(0); strata_seam::embeddings::MAX_CHUNKS + 1];
    let fresh = store.session("b", "alice").unwrap();
    store.append(fresh.id, &[NewMessage::text(Role::User, "more")]).unwrap();
    let waiting = store.backlog(None, None, 10).unwrap();
    assert!(store.put_vectors(MODEL, &[(waiting[0].clone(), too_many)]).is_err());
}

/// Vectors of two models are never mixed: switching the model drops every vector and queues
/// every row again, and vectors of the old model are refused.
#[test]
fn another_model_re_embeds_everything() {
    let (_dir, store) = temp_store();
    session_with(&store, "a", "alice", 3);
    assert!(store.use_space(&space()).unwrap());
    assert!(!store.use_space(&space()).unwrap(), "same model: nothing to do");
    let items: Vec<_> = store
        .backlog(None, None, 10)
        .unwrap()
        .into_iter()
        .map(|item| (item, vec![vec![0.25f32; DIMS]]))
        .collect();
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 3);
    let other = EmbeddingSpace { model: "other".into(), dimensions: 24 };
    assert!(store.use_space(&other).unwrap());
    assert_eq!(store.dump().space().unwrap(), Some(other));
    assert_eq!(store.embeddings().counts().unwrap().messages, 0);
    assert_eq!(store.backlog(None, None, 10).unwrap().len(), 3, "every row waits again");
    let stale: Vec<_> =
        store.backlog(None, None, 10).unwrap().into_iter().map(|i| (i, vec![vec![0.5f32; DIMS]])).collect();
    assert!(store.put_vectors(MODEL, &stale).is_err(), "vectors of the old model are refused");
    assert!(store.use_space(&EmbeddingSpace { model: "bad".into(), dimensions: 0 }).is_err());
}

/// A message is indexed for ranking with its speaker, and ranked by words (stemmed).
#[test]
fn words_rank_with_the_speaker() {
    let (_dir, store) = temp_store();
    let session = store.session("s", "p").unwrap();
    let mut caroline = NewMessage::text(Role::User, "I painted a sunrise last weekend.");
    caroline.name = Some("Caroline".into());
    let mut melanie = NewMessage::text(Role::Assistant, "Painting is relaxing, isn't it?");
    melanie.name = Some("Melanie".into());
    let ids =
        store.append(session.id, &[caroline, melanie, NewMessage::text(Role::User, "unrelated")]).unwrap();
    let filter = SearchFilter::persona("p");
    let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let ranked = rank_words(&store, HitKind::Message, &words(&["caroline", "paint"]), &filter);
    assert_eq!(ranked.len(), 2, "{ranked:?}");
    assert_eq!(ranked[0].0, HitId::Message(ids[0]), "speaker and stem both match");
    assert!(ranked[0].1 > ranked[1].1 && ranked[1].1 > 0.0);
    assert!(rank_words(&store, HitKind::Message, &words(&["NEAR(\"x"]), &filter).is_empty());
    assert!(
        rank_words(&store, HitKind::Message, &words(&["caroline"]), &SearchFilter::persona("q")).is_empty()
    );
}

/// Regression: a memory rewritten while its old text was being embedded lost its new vector
/// for good (the old vector took the queued row off the backlog).
#[test]
fn a_vector_of_outdated_text_does_not_clear_the_backlog() {
    let (_dir, store) = temp_store();
    remember(&store, Writer::Agent, "p", Category::Memo, "plan", "first plan").unwrap();
    let stale = store.backlog(None, None, 10).unwrap();
    assert_eq!(stale.len(), 1);
    remember(&store, Writer::Agent, "p", Category::Memo, "plan", "second plan").unwrap();
    store.use_space(&space()).unwrap();
    let vector = vec![vec![0.5f32; DIMS]];
    assert_eq!(store.put_vectors(MODEL, &[(stale[0].clone(), vector.clone())]).unwrap(), 0);
    let fresh = store.backlog(None, None, 10).unwrap();
    assert_eq!(fresh.len(), 1);
    assert!(fresh[0].text.ends_with("second plan"), "{fresh:?}");
    // A cut prefix of the current text is the current text as far as the model can see.
    let mut cut = fresh[0].clone();
    cut.text.truncate(6);
    assert_eq!(store.put_vectors(MODEL, &[(cut, vector)]).unwrap(), 1);
    assert!(store.backlog(None, None, 10).unwrap().is_empty());
}

#[test]
fn consistent_reads_do_not_see_a_commit_made_between_them() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 6);
    let seen = strata_seam::read_consistent(&store, |reader| {
        let before = reader.context_messages(session.id, 0)?.len();
        // Another connection commits a compaction between two reads of the snapshot.
        store.insert_leaf(session.id, 0, 3, &summary("meanwhile")).unwrap();
        let roots = reader.roots(session.id, None)?.len();
        let after = reader.context_messages(session.id, 0)?.len();
        Ok((before, roots, after))
    })
    .unwrap();
    assert_eq!(seen, (6, 0, 6), "the snapshot neither shows the node nor loses the messages");
    assert_eq!(store.roots(session.id, None).unwrap().len(), 1, "the compaction did commit");
    assert_eq!(store.context_messages(session.id, 0).unwrap().len(), 2);
}

/// Regression: opening a store ran the schema check inside `BEGIN IMMEDIATE`, so a read command
/// failed with "database is locked" while an import held the write lock.
#[test]
fn readers_open_and_search_while_a_writer_holds_the_lock() {
    let (dir, store) = temp_store();
    session_with(&store, "a", "alice", 3);
    let writer = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE; INSERT INTO sessions(key, role, created_at, last_active_at) VALUES ('w', 'x', 0, 0);").unwrap();
    let reader =
        Store::open_with_timeout(dir.path().join("strata.db"), std::time::Duration::from_millis(50)).unwrap();
    assert_eq!(reader.stats().unwrap().sessions, 1, "the uncommitted write is not seen");
    assert!(
        !reader
            .grep(&TextQuery::parse("message").unwrap(), &SearchFilter::persona("alice"))
            .unwrap()
            .is_empty()
    );
    writer.execute_batch("COMMIT").unwrap();
}

#[test]
fn doctor_finds_a_broken_forest_and_a_healthy_file_passes() {
    let (dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 12);
    let a = store.insert_leaf(session.id, 0, 2, &summary("a")).unwrap();
    let b = store.insert_leaf(session.id, 3, 5, &summary("b")).unwrap();
    store.merge(&[a.id, b.id], &summary("ab")).unwrap();
    let report = store.doctor(true).unwrap();
    assert!(report.healthy(), "{report:#?}");
    assert_eq!(report.embedding_backlog, 12 + 3);

    // Someone edits the file by hand: a covered message loses its link.
    let conn = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    conn.execute("UPDATE messages SET summary_id = NULL WHERE seq = 1", []).unwrap();
    let report = store.doctor(false).unwrap();
    assert!(!report.healthy());
    let broken: Vec<&Check> = report.checks.iter().filter(|check| check.problems > 0).collect();
    assert_eq!(broken.len(), 1, "{broken:#?}");
    assert_eq!(broken[0].name, "each Level-0 node covers every message of its range");
    assert!(broken[0].details[0].starts_with(&format!("node {} ", a.id)), "{:?}", broken[0].details);
}

#[test]
fn a_damaged_file_is_named_by_quick_check() {
    let (dir, store) = temp_store();
    session_with(&store, "s", "p", 400);
    drop(store);
    let path = dir.path().join("strata.db");
    // Flip bytes inside a few pages past the schema (as a failing disk would).
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&path).unwrap();
    let pages = bytes.len() / 4096;
    for page in (pages * 3 / 4..pages).step_by(4) {
        for byte in &mut bytes[page * 4096 + 8..page * 4096 + 40] {
            *byte ^= 0xA5;
        }
    }
    std::fs::write(&path, &bytes).unwrap();
    // Either opening already trips over the damage, or the check names it: never a silent pass.
    let err = match Store::open(&path) {
        Ok(store) => store.quick_check().unwrap_err(),
        Err(err) => err,
    };
    assert!(
        matches!(err, Error::Damaged { problems, .. } if problems > 0) || matches!(err, Error::Corrupt(_)),
        "{err:?}"
    );
    assert!(!err.to_string().contains('\n'), "one line: {err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "the damaged file is left as it was");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 2_000, failure_persistence: None, ..Default::default() })]

    /// Any text a model sends as a grep query either parses and runs, or is refused as an
    /// invalid query: never a panic, never an SQL error.
    #[test]
    fn any_grep_query_parses_and_runs_or_is_refused(query in "\\PC{0,40}|[\"*()^:+\\-a-zA-Z0-9 ]{0,24}") {
        thread_local! {
            static STORE: (tempfile::TempDir, Store) = {
                let (dir, store) = temp_store();
                session_with(&store, "s", "p", 20);
                (dir, store)
            };
        }
        STORE.with(|(_, store)| match TextQuery::parse(&query) {
            Ok(parsed) => {
                store.grep(&parsed, &SearchFilter::persona("p")).unwrap();
            }
            Err(err) => assert!(matches!(err, Error::Invalid { field: "query", .. }), "{query:?}: {err:?}"),
        });
    }
}

/// Deterministic pseudo-random unit vectors (xorshift), so no two rows tie.
fn scattered(seed: u64, dims: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v: Vec<f32> = (0..dims)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// The 1-bit scan reads sqlite-vec's storage itself: with every chunk re-scored it must give
/// exactly what sqlite-vec's exact search gives, across several vec0 chunks (1,024 vectors
/// each), with another persona's vectors and deleted vectors in the same tables.
#[test]
fn quantized_scan_agrees_with_sqlite_vec() {
    let (_dir, store) = temp_store();
    // 96 dimensions: 12 bytes of bits, one 64-bit word and a remainder.
    const WIDE: usize = 96;
    let space = EmbeddingSpace { model: MODEL.into(), dimensions: WIDE };
    store.use_space(&space).unwrap();
    for (key, persona, n) in [("a1", "alice", 1_000), ("b", "bob", 500), ("a2", "alice", 1_500)] {
        session_with(&store, key, persona, n);
    }
    for (i, key) in ["one", "two", "three"].into_iter().enumerate() {
        remember(&store, Writer::Agent, "alice", Category::Memo, key, &format!("note {i}")).unwrap();
    }
    let backlog = store.backlog(None, None, 10_000).unwrap();
    assert_eq!(backlog.len(), 3_003);
    let items: Vec<_> =
        backlog.iter().map(|item| (item.clone(), vec![scattered(item.id.raw() as u64, WIDE)])).collect();
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 3_003);
    assert!(store.delete_memory(Writer::Agent, "alice", Category::Memo, "two").unwrap());

    let every_chunk = Scan::Quantized { candidates: 100_000 };
    for seed in [7_u64, 8, 9] {
        let query = scattered(1_000_000 + seed, WIDE);
        let exact =
            store.embeddings().nearest(MODEL, HitKind::Message, "alice", &query, 20, Scan::Exact).unwrap();
        let quantized =
            store.embeddings().nearest(MODEL, HitKind::Message, "alice", &query, 20, every_chunk).unwrap();
        assert_eq!(exact.len(), 20);
        assert_eq!(
            exact.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            quantized.iter().map(|(id, _)| *id).collect::<Vec<_>>()
        );
        for ((_, a), (_, b)) in exact.iter().zip(&quantized) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        let memories =
            store.embeddings().nearest(MODEL, HitKind::Memory, "alice", &query, 10, every_chunk).unwrap();
        let exact_memories =
            store.embeddings().nearest(MODEL, HitKind::Memory, "alice", &query, 10, Scan::Exact).unwrap();
        assert_eq!(memories.len(), 2, "the deleted memory's vector is skipped: {memories:?}");
        assert_eq!(
            memories.iter().map(|m| m.0).collect::<Vec<_>>(),
            exact_memories.iter().map(|m| m.0).collect::<Vec<_>>()
        );
    }
    // A few hundred candidates find the nearest rows of 2,500 (the query is one of them).
    let target =
        backlog.iter().find(|item| item.persona == "alice" && item.id.kind() == HitKind::Message).unwrap();
    let query = scattered(target.id.raw() as u64, WIDE);
    let found = store
        .embeddings()
        .nearest(MODEL, HitKind::Message, "alice", &query, 5, Scan::Quantized { candidates: 200 })
        .unwrap();
    assert_eq!(found[0].0, target.id);
    assert!(found[0].1.abs() < 1e-5);
}

/// A database embedded before the floats tables existed re-scores from vec0's own storage, and
/// gets its floats tables, filled, on its next embedding run (`use_space`): the same answers
/// before and after.
#[test]
fn vectors_stored_before_the_floats_tables_are_searched_and_copied() {
    let (dir, store) = temp_store();
    const WIDE: usize = 64;
    let space = EmbeddingSpace { model: MODEL.into(), dimensions: WIDE };
    store.use_space(&space).unwrap();
    session_with(&store, "a", "alice", 1_500);
    let backlog = store.backlog(None, None, 10_000).unwrap();
    let items: Vec<_> =
        backlog.iter().map(|item| (item.clone(), vec![scattered(item.id.raw() as u64, WIDE)])).collect();
    store.put_vectors(MODEL, &items).unwrap();
    let query = scattered(99, WIDE);
    let every_chunk = Scan::Quantized { candidates: 100_000 };
    let exact =
        store.embeddings().nearest(MODEL, HitKind::Message, "alice", &query, 20, Scan::Exact).unwrap();
    let ids = |found: &[(HitId, f64)]| found.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    let raw = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    raw.execute_batch("DROP TABLE messages_vec_floats").unwrap();
    let from_vec0 =
        store.embeddings().nearest(MODEL, HitKind::Message, "alice", &query, 20, every_chunk).unwrap();
    assert_eq!(ids(&from_vec0), ids(&exact));
    assert!(!store.use_space(&space).unwrap(), "the same space");
    let copied: i64 =
        raw.query_row("SELECT count(*) FROM messages_vec_floats", [], |row| row.get(0)).unwrap();
    assert_eq!(copied, 1_500);
    let from_floats =
        store.embeddings().nearest(MODEL, HitKind::Message, "alice", &query, 20, every_chunk).unwrap();
    assert_eq!(ids(&from_floats), ids(&exact));
}

/// A session or time window is searched among its own rows: nearer rows outside it do not
/// crowd it out, whatever the scan.
#[test]
fn a_sparse_window_is_searched_within() {
    let (_dir, store) = temp_store();
    let space = EmbeddingSpace { model: MODEL.into(), dimensions: 32 };
    store.use_space(&space).unwrap();
    session_with(&store, "big", "alice", 3_000);
    let small = session_with(&store, "small", "alice", 2);
    let backlog = store.backlog(None, None, 10_000).unwrap();
    let items: Vec<_> =
        backlog.iter().map(|item| (item.clone(), vec![scattered(item.id.raw() as u64, 32)])).collect();
    store.put_vectors(MODEL, &items).unwrap();
    let small_ids: Vec<i64> = store.all_messages(small.id).unwrap().iter().map(|m| m.id.0).collect();
    // A query right on a row of the big session: every nearest row is outside the window.
    let query = scattered(backlog[10].id.raw() as u64, 32);
    let window = SearchFilter { session: Some(small.id), ..SearchFilter::persona("alice") };
    for scan in [Scan::Exact, Scan::Quantized { candidates: 50 }] {
        let near = nearest_within(&store, HitKind::Message, &window, &query, 10, scan);
        let mut ids: Vec<i64> = near.iter().map(|(id, _)| id.raw()).collect();
        ids.sort();
        assert_eq!(ids, small_ids, "{scan:?}");
        assert!(nearest_within(&store, HitKind::Memory, &window, &query, 10, scan).is_empty());
    }
    // Time windows: one after every message holds nothing; one around every message finds the
    // nearest row of all.
    let late = SearchFilter {
        start: Some(chrono::Utc::now() + chrono::Duration::days(1)),
        ..SearchFilter::persona("alice")
    };
    assert!(
        nearest_within(&store, HitKind::Message, &late, &query, 10, Scan::Quantized { candidates: 50 })
            .is_empty()
    );
    let all = SearchFilter {
        end: Some(chrono::Utc::now() + chrono::Duration::days(1)),
        ..SearchFilter::persona("alice")
    };
    let near = nearest_within(&store, HitKind::Message, &all, &query, 10, Scan::Quantized { candidates: 50 });
    assert_eq!(near[0].0, backlog[10].id, "{near:?}");
}

/// A window too large to read first is filtered after the scan; when the persona's nearest rows
/// all lie outside it, the search falls back to scanning among the window's own rows instead of
/// coming back empty, whatever the scan.
#[test]
fn a_large_window_whose_rows_are_all_far_still_comes_back_full() {
    let (_dir, store) = temp_store();
    const DIMS: usize = 32;
    let space = EmbeddingSpace { model: MODEL.into(), dimensions: DIMS };
    store.use_space(&space).unwrap();
    // More rows than a window may hold to be read first (20,000), all far from the query, and
    // a few hundred outside the window right beside it.
    let wide = session_with(&store, "wide", "alice", 20_001);
    session_with(&store, "near", "alice", 400);
    let query = scattered(1, DIMS);
    let around = |sign: f32, seed: u64| -> Vec<f32> {
        let noise = scattered(seed, DIMS);
        let mut v: Vec<f32> = query.iter().zip(&noise).map(|(q, n)| sign * q + 0.3 * n).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= norm);
        v
    };
    let wide_ids: std::collections::HashSet<i64> =
        store.all_messages(wide.id).unwrap().iter().map(|m| m.id.0).collect();
    let backlog = store.backlog(None, None, 30_000).unwrap();
    let items: Vec<_> = backlog
        .iter()
        .map(|item| {
            let sign = if wide_ids.contains(&item.id.raw()) { -1.0 } else { 1.0 };
            (item.clone(), vec![around(sign, item.id.raw() as u64 + 7)])
        })
        .collect();
    assert_eq!(store.put_vectors(MODEL, &items).unwrap(), 20_401);
    let window = SearchFilter { session: Some(wide.id), ..SearchFilter::persona("alice") };
    for scan in [Scan::Exact, Scan::Quantized { candidates: 50 }] {
        let unfiltered =
            nearest_within(&store, HitKind::Message, &SearchFilter::persona("alice"), &query, 10, scan);
        assert!(unfiltered.iter().all(|(id, _)| !wide_ids.contains(&id.raw())), "the nearest are outside");
        let near = nearest_within(&store, HitKind::Message, &window, &query, 10, scan);
        assert_eq!(near.len(), 10, "{scan:?}");
        assert!(near.iter().all(|(id, _)| wide_ids.contains(&id.raw())), "{scan:?}: {near:?}");
    }
}

/// Schema 8: a bulk import leaves search indexing to its caller, `append` catches up before it
/// returns, and a search finds the unindexed rows without writing: the same hits before and
/// after the catch-up. Doctor checks whole tables and writes nothing.
#[test]
fn a_search_finds_unindexed_messages_without_writing() {
    let (_dir, store) = temp_store();
    let small = session_with(&store, "small", "p", 2);
    assert_eq!(store.unindexed_messages().unwrap(), 0, "a bot's message is indexed with its append");
    session_with(&store, "appended", "p", 100);
    assert_eq!(store.unindexed_messages().unwrap(), 0, "a bulk append catches the index up");
    let incoming: Vec<IncomingMessage> = (0..100)
        .map(|i| IncomingMessage {
            session_key: "bulk".to_owned(),
            persona: "p".to_owned(),
            message: text(Role::User, &format!("message {i} of bulk, Café Zürich")),
            line_digest: None,
        })
        .collect();
    store.append_many(&incoming).unwrap();
    assert_eq!(store.unindexed_messages().unwrap(), 100, "a bulk import leaves indexing to its caller");
    assert!(store.doctor(false).unwrap().healthy());
    assert_eq!(store.unindexed_messages().unwrap(), 100, "doctor writes nothing");
    // A small append behind a waiting backlog must not skip it: it waits too.
    store.append(small.id, &[text(Role::User, "message late of small")]).unwrap();
    let waiting = store.unindexed_messages().unwrap();
    let queries = ["message 99 of bulk", "late", "cafe zurich", "CAFÉ", "of", "of app*", "e 9"];
    let grep = |query: &str| {
        let hits = store.grep(&TextQuery::parse(query).unwrap(), &SearchFilter::persona("p")).unwrap();
        hits.into_iter().map(|hit| (hit.id, hit.snippet)).collect::<Vec<_>>()
    };
    let before: Vec<_> = queries.iter().map(|query| grep(query)).collect();
    assert_eq!(before[0].len(), 1, "{:?}", before[0]);
    assert_eq!(before[1].len(), 1, "{:?}", before[1]);
    assert_eq!(before[2].len(), 20, "a page of rows folded as the index folds: {:?}", before[2]);
    assert_eq!(store.unindexed_messages().unwrap(), waiting, "a search writes nothing");
    // The word ranking reads the index as it is.
    let ranked = rank_words(&store, HitKind::Message, &["bulk".into()], &SearchFilter::persona("p"));
    assert!(ranked.is_empty(), "{ranked:?}");
    assert_eq!(store.catch_up_search_index().unwrap(), waiting as usize);
    assert_eq!(store.unindexed_messages().unwrap(), 0);
    let after: Vec<_> = queries.iter().map(|query| grep(query)).collect();
    assert_eq!(before, after, "the unindexed rows are found as the index finds them");
    let ranked = rank_words(&store, HitKind::Message, &["bulk".into()], &SearchFilter::persona("p"));
    assert!(!ranked.is_empty());
}

/// Schema 10: summary nodes are written without their index entries and indexed by the
/// compactor's `index_summaries`; a search finds them before that without writing; a node
/// replaced before or after it was indexed is found by its new text only, and doctor finds
/// the indexes whole either way.
#[test]
fn unindexed_summaries_are_found_and_replacements_follow() {
    let (_dir, store) = temp_store();
    let session = session_with(&store, "s", "p", 6);
    let find = |q: &str| {
        store
            .grep(&TextQuery::parse(q).unwrap(), &SearchFilter::persona("p"))
            .unwrap()
            .into_iter()
            .filter(|hit| hit.kind() == HitKind::Summary)
            .count()
    };
    let early = store.insert_leaf(session.id, 0, 1, &summary("zeppelin early")).unwrap();
    assert_eq!(store.unindexed_summaries().unwrap(), 1, "a node is written without index entries");
    assert!(store.doctor(false).unwrap().healthy());
    assert_eq!(store.unindexed_summaries().unwrap(), 1, "doctor writes nothing");
    // Replaced before it was indexed: no index entry to remove, the new text is indexed later.
    store.replace_summary(early.id, "extractive", &summary("walrus early")).unwrap();
    assert_eq!(find("zeppelin"), 0);
    assert_eq!(find("walrus"), 1);
    assert_eq!(store.unindexed_summaries().unwrap(), 1, "a search writes nothing");
    assert_eq!(store.catch_up_search_index().unwrap(), 1);
    assert_eq!(find("zeppelin"), 0);
    assert_eq!(find("walrus"), 1);
    // Replaced after it was indexed: the triggers swap the entries.
    store.replace_summary(early.id, "extractive", &summary("narwhal early")).unwrap();
    assert_eq!(find("walrus"), 0);
    assert_eq!(find("narwhal"), 1);
    let late = store.insert_leaf(session.id, 2, 3, &summary("zeppelin late")).unwrap();
    assert_eq!(store.catch_up_search_index().unwrap(), 1);
    assert_eq!(store.unindexed_summaries().unwrap(), 0);
    assert_eq!(find("zeppelin"), 1);
    let ranked = rank_words(&store, HitKind::Summary, &["zeppelin".to_owned()], &SearchFilter::persona("p"));
    assert_eq!(ranked.first().map(|hit| hit.0), Some(HitId::Summary(late.id)), "{ranked:?}");
    assert!(store.doctor(true).unwrap().healthy());
}
