//! The conformance suite: one behaviour, every backend. Each test here takes a fresh, empty
//! backend through the seam alone ([`Backend`]) and checks a rule the engine relies on: dense
//! seqs and idempotent appends, write-once coverage, compare-and-swap rewrites, one memory per
//! key, persona isolation in search, leases, imports, exports, forgets, backups, usage.
//!
//! A backend runs all of it with one macro call in its tests; strata-store runs it on a SQLite
//! file, strata-pg on a real PostgreSQL server, and a third backend would do the same:
//!
//! ```text
//! strata_seam::conformance_suite!(fresh_backend, open_sqlite_file);
//! ```
//!
//! `fresh_backend()` returns anything that dereferences to a `dyn Backend` and holds what the
//! database lives in until it is dropped; `open_sqlite_file(&Path)` opens the SQLite file a
//! backup wrote, to read it back.

use std::path::Path;

use crate::embeddings::{BacklogItem, EmbeddingSpace};
use crate::forgetting::ForgetScope;
use crate::memories::Provenance;
use crate::memories::{MemoryUpdate, MemoryWrite, Writer};
use crate::search::{CandidateQuery, HitKind, Scan, SearchFilter, TextQuery};
use crate::transfer::{ExportScope, IncomingMessage, line_digest};
use crate::{Backend, Category, Error, NewMessage, NewSummary, Role};

/// The backend a test runs on, and how to open the SQLite file a backup writes.
#[derive(Clone, Copy)]
pub struct Subject<'a> {
    /// A fresh, empty backend.
    pub backend: &'a dyn Backend,
    /// Opens a SQLite file strata wrote (a backup), to read it back.
    pub open_file: &'a dyn Fn(&Path) -> Box<dyn Backend>,
}

impl std::fmt::Debug for Subject<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subject").field("backend", &self.backend.name()).finish_non_exhaustive()
    }
}

/// Writes one `#[test]` per conformance test, each on a fresh backend from `$fresh` (a function
/// returning something that dereferences to a `dyn Backend`), with `$open_file` (a function
/// from a path to a `Box<dyn Backend>`) to read back the SQLite file a backup writes.
#[macro_export]
macro_rules! conformance_suite {
    ($fresh:path, $open_file:path) => {
        $crate::conformance_suite!(@tests $fresh, $open_file;
            appends_number_messages_densely_and_are_idempotent_by_key,
            a_session_key_belongs_to_one_persona,
            coverage_is_written_once,
            a_merge_links_adjacent_roots_once,
            replacing_a_summary_is_compare_and_swap,
            one_memory_per_key_and_preferences_are_the_users,
            a_superseded_fact_is_true_until_its_date_and_stays_in_the_history,
            two_keys_of_one_meaning_merge_into_one_memory,
            a_backup_is_a_new_sqlite_file_holding_every_message,
            summaries_queue_their_facts_until_settled,
            grep_finds_fragments_in_any_script_folding_case_and_accents,
            search_candidates_stay_within_the_persona,
            another_personas_words_never_move_the_scores,
            a_compaction_lease_has_one_holder,
            bad_input_changes_nothing,
            an_import_run_again_adds_nothing_and_an_edited_one_is_refused,
            an_export_holds_every_field_of_a_persona,
            forgetting_a_persona_erases_it_and_nothing_else,
            forgetting_a_sessions_start_rewrites_the_node_that_keeps_messages,
            messages_are_deleted_only_by_a_forget,
            usage_is_summed_per_day_purpose_caller_and_model,
            a_stated_preference_is_proposed_once_per_key,
        );
    };
    (@tests $fresh:path, $open_file:path; $($name:ident,)*) => {
        $(
            #[test]
            fn $name() {
                let fixture = $fresh();
                let open_file = |path: &::std::path::Path| -> ::std::boxed::Box<dyn $crate::Backend> { ::std::boxed::Box::new($open_file(path)) };
                $crate::conformance::$name(&$crate::conformance::Subject { backend: &*fixture, open_file: &open_file });
            }
        )*
    };
}

fn summary(headline: &str) -> NewSummary {
    NewSummary {
        headline: headline.into(),
        body: format!("- {headline}"),
        token_count: 7,
        summarizer: "extractive".into(),
        memory_updates: Vec::new(),
    }
}

fn said(backend: &dyn Backend, key: &str, persona: &str, texts: &[&str]) -> crate::SessionId {
    let session = backend.session(key, persona).unwrap();
    let messages: Vec<NewMessage> = texts.iter().map(|text| NewMessage::text(Role::User, *text)).collect();
    backend.append(session.id, &messages).unwrap();
    session.id
}

/// A conformance test; see the module.
pub fn appends_number_messages_densely_and_are_idempotent_by_key(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = backend.session("chat", "alice").unwrap();
    let keyed = |key: &str, text: &str| NewMessage {
        external_id: Some(key.into()),
        ..NewMessage::text(Role::User, text)
    };
    let first = backend.append(session.id, &[keyed("a", "one"), keyed("b", "two")]).unwrap();
    // A retry of the same batch, plus one new message: the old ones come back, once.
    let again =
        backend.append(session.id, &[keyed("a", "one"), keyed("b", "two"), keyed("c", "three")]).unwrap();
    assert_eq!(again[..2], first[..]);
    let stored = backend.messages(session.id, 0..=i64::MAX).unwrap();
    let texts: Vec<(i64, &str)> = stored.iter().map(|m| (m.seq, m.content.as_str())).collect();
    assert_eq!(texts, [(0, "one"), (1, "two"), (2, "three")]);
    assert_eq!(backend.message(again[2]).unwrap().content, "three");
    // A key reused for another message is the caller's bug: refused, nothing stored.
    let error = backend.append(session.id, &[keyed("d", "four"), keyed("a", "not one")]).unwrap_err();
    assert!(matches!(error, Error::Invalid { field: "external_id", .. }), "{error}");
    assert_eq!(backend.messages(session.id, 0..=i64::MAX).unwrap().len(), 3);
    // One key twice in one call is one message.
    let twice = backend.append(session.id, &[keyed("e", "five"), keyed("e", "five")]).unwrap();
    assert_eq!(twice[0], twice[1]);
    assert_eq!(backend.messages(session.id, 0..=i64::MAX).unwrap().len(), 4);
}

/// A conformance test; see the module.
pub fn a_session_key_belongs_to_one_persona(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = backend.session("chat", "alice").unwrap();
    assert_eq!(backend.session("chat", "alice").unwrap().id, session.id);
    let error = backend.session("chat", "bob").unwrap_err();
    assert!(matches!(error, Error::PersonaMismatch { .. }), "{error}");
    assert!(backend.session("other", "no spaces allowed").is_err());
}

/// A conformance test; see the module.
pub fn coverage_is_written_once(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["a", "b", "c", "d"]);
    let leaf = backend.insert_leaf(session, 0, 1, &summary("first two")).unwrap();
    let covered: Vec<i64> = backend.covered_messages(leaf.id).unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(covered, [0, 1]);
    let error = backend.insert_leaf(session, 1, 2, &summary("overlap")).unwrap_err();
    assert!(matches!(error, Error::AlreadyCovered { seq: 1, .. }), "{error}");
    // Seq 2 stayed uncovered: the refused node wrote nothing.
    assert_eq!(backend.messages(session, 2..=2).unwrap()[0].summary_id, None);
    assert!(backend.insert_leaf(session, 2, 9, &summary("past the end")).is_err());
    assert_eq!(backend.roots(session, None).unwrap().len(), 1);
}

/// A conformance test; see the module.
pub fn a_merge_links_adjacent_roots_once(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["a", "b", "c", "d", "e", "f"]);
    let nodes: Vec<_> = (0..3)
        .map(|i| backend.insert_leaf(session, i * 2, i * 2 + 1, &summary(&format!("pair {i}"))).unwrap())
        .collect();
    let error = backend.merge(&[nodes[0].id, nodes[2].id], &summary("not adjacent")).unwrap_err();
    assert!(matches!(error, Error::Invalid { field: "children", .. }), "{error}");
    let parent = backend.merge(&[nodes[1].id, nodes[0].id], &summary("first four")).unwrap();
    assert_eq!((parent.level.0, parent.first_seq, parent.last_seq), (1, 0, 3));
    let error = backend.merge(&[nodes[1].id, nodes[2].id], &summary("again")).unwrap_err();
    assert!(matches!(error, Error::AlreadyMerged { .. }), "{error}");
    let roots: Vec<_> = backend.roots(session, None).unwrap().iter().map(|node| node.id).collect();
    assert_eq!(roots, [parent.id, nodes[2].id]);
    assert_eq!(backend.node(nodes[0].id).unwrap().parent_id, Some(parent.id));
}

/// A conformance test; see the module.
pub fn replacing_a_summary_is_compare_and_swap(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["a", "b"]);
    let raw = NewSummary { summarizer: "raw-archive".into(), ..summary("raw") };
    let node = backend.insert_leaf(session, 0, 1, &raw).unwrap();
    let better = NewSummary { summarizer: "llm".into(), ..summary("the real summary") };
    assert_eq!(
        backend.replace_summary(node.id, "raw-archive", &better).unwrap().headline,
        "the real summary"
    );
    let error = backend.replace_summary(node.id, "raw-archive", &summary("late")).unwrap_err();
    assert!(matches!(error, Error::AlreadyReplaced { .. }), "{error}");
    assert_eq!(backend.node(node.id).unwrap().summarizer, "llm");
}

/// A conformance test; see the module.
pub fn one_memory_per_key_and_preferences_are_the_users(subject: &Subject<'_>) {
    let backend = subject.backend;
    let write = |content| MemoryWrite { category: Category::Memo, key: "port", title: "Port", content };
    let first = backend.put_memory(Writer::Agent, "alice", &write("8080")).unwrap();
    let second = backend.put_memory(Writer::Agent, "alice", &write("9090")).unwrap();
    assert_eq!(first.id, second.id);
    assert_eq!(backend.memory("alice", Category::Memo, "port").unwrap().unwrap().content, "9090");
    assert_eq!(backend.memory("bob", Category::Memo, "port").unwrap(), None);
    let preference =
        MemoryWrite { category: Category::UserPreferences, key: "tone", title: "Tone", content: "terse" };
    assert!(matches!(backend.put_memory(Writer::Agent, "alice", &preference), Err(Error::ProtectedCategory)));
    backend.put_memory(Writer::User, "alice", &preference).unwrap();
    assert_eq!(backend.memories("alice", None).unwrap().len(), 2);
    assert_eq!(backend.memories("alice", Some(Category::UserPreferences)).unwrap().len(), 1);
}

/// Two times a stored round trip keeps apart: times are read back to the millisecond.
fn near(a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>) -> bool {
    (a - b).num_microseconds().is_some_and(|micros| micros.abs() <= 500)
}

/// A conformance test; see the module.
pub fn a_superseded_fact_is_true_until_its_date_and_stays_in_the_history(subject: &Subject<'_>) {
    let backend = subject.backend;
    use chrono::{TimeDelta, Utc};
    let write = |content| MemoryWrite { category: Category::Memo, key: "office", title: "Office", content };
    let old = backend.put_memory(Writer::User, "alice", &write("12 Elm Street")).unwrap();
    assert!(old.valid_to.is_none());
    // The clock moves past the old text's start, so each text has a time of its own.
    while Utc::now() <= old.valid_from + TimeDelta::milliseconds(4) {
        std::hint::spin_loop();
    }
    let moved = Utc::now() - TimeDelta::milliseconds(2);
    let source = Provenance::user("test");
    let supersede = |with: Option<&MemoryWrite<'_>>, at| {
        backend.supersede_memory(Writer::User, "alice", Category::Memo, "office", with, at, &source)
    };
    let new = supersede(Some(&write("40 Oak Avenue")), moved).unwrap();
    assert_eq!((new.id, new.content.as_str(), new.valid_to), (old.id, "40 Oak Avenue", None));
    assert!(near(new.valid_from, moved), "{new:?}");
    // Now: the new text. At a time between: the old one, with the date it stopped.
    let current = backend.memories("alice", None).unwrap();
    assert_eq!(current.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(), ["40 Oak Avenue"]);
    let between = old.valid_from + (moved - old.valid_from) / 2;
    let then = backend.memories_as_of("alice", None, between).unwrap();
    assert_eq!(then.len(), 1, "{then:?}");
    assert_eq!(then[0].content, "12 Elm Street");
    assert!(near(then[0].valid_from, old.valid_from) && then[0].valid_to.is_some_and(|to| near(to, moved)));
    let today = backend.memories_as_of("alice", Some(Category::Memo), Utc::now()).unwrap();
    assert_eq!((today.len(), today[0].content.as_str()), (1, "40 Oak Avenue"));
    assert!(
        backend.memories_as_of("alice", None, old.valid_from - TimeDelta::seconds(1)).unwrap().is_empty()
    );
    assert!(backend.memories_as_of("bob", None, between).unwrap().is_empty());
    let history = backend.memory_history("alice", Category::Memo, "office").unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[0].valid_to.is_none() && near(history[0].valid_from, moved));
    assert!(history[1].valid_to.is_some_and(|to| near(to, moved)) && history[1].content == "12 Elm Street");

    // Refused, changing nothing: a future time, a time before the text became true, the same
    // text, a missing memory, the agent on a preference.
    let refused = [
        supersede(Some(&write("1 Pine Road")), Utc::now() + TimeDelta::hours(1)),
        supersede(Some(&write("1 Pine Road")), old.valid_from),
        supersede(Some(&write("40 Oak Avenue")), Utc::now()),
        supersede(Some(&MemoryWrite { key: "other", ..write("1 Pine Road") }), Utc::now()),
    ];
    for result in refused {
        assert!(matches!(result, Err(Error::Invalid { .. })), "{result:?}");
    }
    let missing =
        backend.supersede_memory(Writer::User, "alice", Category::Memo, "nope", None, Utc::now(), &source);
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    let preference = backend.supersede_memory(
        Writer::Agent,
        "alice",
        Category::UserPreferences,
        "tone",
        None,
        Utc::now(),
        &source,
    );
    assert!(matches!(preference, Err(Error::ProtectedCategory)), "{preference:?}");
    assert_eq!(backend.memory_history("alice", Category::Memo, "office").unwrap(), history);

    // Ended with nothing in its place: it stays, dated, until an ordinary write makes it true again.
    let ended = supersede(None, Utc::now()).unwrap();
    // Times are read back rounded to the millisecond, so an end written within the last half
    // millisecond can read as a moment ahead: "ended by" is asked a millisecond on.
    let soon = Utc::now() + TimeDelta::milliseconds(1);
    assert!(ended.valid_to.is_some() && ended.ended_by(soon), "{ended:?}");
    assert!(matches!(supersede(None, Utc::now()), Err(Error::Invalid { .. })), "ended already");
    assert_eq!(backend.memories("alice", None).unwrap().len(), 1, "kept for history");
    let again = backend.put_memory(Writer::User, "alice", &write("40 Oak Avenue")).unwrap();
    assert!(again.valid_to.is_none());
}

/// A conformance test; see the module.
pub fn two_keys_of_one_meaning_merge_into_one_memory(subject: &Subject<'_>) {
    let backend = subject.backend;
    let write = |key, content| MemoryWrite { category: Category::Memo, key, title: "Textbook", content };
    backend.put_memory(Writer::User, "alice", &write("standard_japanese", "volume 1")).unwrap();
    backend.put_memory(Writer::User, "alice", &write("标日学习", "第13课")).unwrap();
    let source = Provenance::user("merge");
    let merge =
        |key, into: &MemoryWrite<'_>| backend.merge_memory("alice", Category::Memo, key, into, &source);

    // Refused, changing nothing: into itself, into a missing memory, a missing memory.
    let before = backend.memories("alice", None).unwrap();
    assert!(matches!(merge("标日学习", &write("标日学习", "x")), Err(Error::Invalid { .. })));
    assert!(matches!(merge("标日学习", &write("nope", "x")), Err(Error::NotFound(_))));
    assert!(matches!(merge("nope", &write("standard_japanese", "x")), Err(Error::NotFound(_))));
    assert_eq!(backend.memories("alice", None).unwrap(), before);

    let kept = merge("标日学习", &write("standard_japanese", "volume 1, 第13课")).unwrap();
    assert_eq!(
        (kept.key.as_str(), kept.content.as_str(), kept.valid_to),
        ("standard_japanese", "volume 1, 第13课", None)
    );
    let ended = backend.memory("alice", Category::Memo, "标日学习").unwrap().unwrap();
    assert!(ended.valid_to.is_some() && ended.content == "第13课", "{ended:?}");
    let history = backend.memory_history("alice", Category::Memo, "standard_japanese").unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].provenance.via.as_deref(), Some("merge"));
    // An ended memory is not merged again, and nothing is merged into one.
    assert!(matches!(merge("标日学习", &write("standard_japanese", "y")), Err(Error::Invalid { .. })));
    assert!(matches!(merge("standard_japanese", &write("标日学习", "y")), Err(Error::Invalid { .. })));
}

/// A conformance test; see the module.
pub fn a_backup_is_a_new_sqlite_file_holding_every_message(subject: &Subject<'_>) {
    let backend = subject.backend;
    said(backend, "chat", "alice", &["the staging port is 5433", "café ☕"]);
    said(backend, "notes", "bob", &["bob's line"]);
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("backup.db");
    backend.backup(&dest).unwrap();
    let copy = (subject.open_file)(&dest);
    for persona in ["alice", "bob"] {
        let (original, copied) = (
            backend.export_messages(ExportScope::Persona(persona)).unwrap(),
            copy.export_messages(ExportScope::Persona(persona)).unwrap(),
        );
        assert_eq!(copied, original, "{persona}");
    }
    drop(copy);
    // Refused, changing nothing: a file that exists; a place no file can be made leaves none.
    let bytes = std::fs::read(&dest).unwrap();
    assert!(matches!(backend.backup(&dest), Err(Error::Invalid { .. })));
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    let nowhere = dir.path().join("missing-directory").join("backup.db");
    assert!(backend.backup(&nowhere).is_err());
    assert!(!nowhere.exists());
}

/// A conformance test; see the module.
pub fn summaries_queue_their_facts_until_settled(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["the port is 8080"]);
    let fact = MemoryUpdate {
        category: Category::Memo,
        key: "port".into(),
        title: "Port".into(),
        content: "8080".into(),
        edit: Some(crate::memories::Edit::Supersede),
    };
    let with_fact = NewSummary { memory_updates: vec![fact.clone()], ..summary("port") };
    backend.insert_leaf(session, 0, 0, &with_fact).unwrap();
    let pending = backend.pending_updates(10).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!((pending[0].persona.as_str(), &pending[0].update), ("alice", &fact));
    backend.settle_update(pending[0].id).unwrap();
    backend.settle_update(pending[0].id).unwrap();
    assert!(backend.pending_updates(10).unwrap().is_empty());
}

/// A conformance test; see the module.
pub fn grep_finds_fragments_in_any_script_folding_case_and_accents(subject: &Subject<'_>) {
    let backend = subject.backend;
    said(backend, "a1", "alice", &["We met at the Café Zürich", "数据库迁移明天完成", "nothing else"]);
    said(backend, "b1", "bob", &["bob's cafe is elsewhere", "数据库 of bob"]);
    let grep = |query: &str, persona: &str| -> Vec<String> {
        let hits = backend.grep(&TextQuery::parse(query).unwrap(), &SearchFilter::persona(persona)).unwrap();
        hits.into_iter().map(|hit| hit.snippet).collect()
    };
    assert_eq!(grep("cafe zurich", "alice"), ["We met at the Café Zürich"]);
    assert_eq!(grep("数据库", "alice"), ["数据库迁移明天完成"]);
    assert_eq!(grep("数据库", "bob"), ["数据库 of bob"]);
    assert!(grep("elsewhere", "alice").is_empty());
    // LIKE's wildcards in a query are plain characters.
    assert!(grep("50%_off", "alice").is_empty());
    backend
        .put_memory(
            Writer::Agent,
            "alice",
            &MemoryWrite {
                category: Category::Memo,
                key: "db_move",
                title: "DB",
                content: "moving the 数据库",
            },
        )
        .unwrap();
    let hits = backend.grep(&TextQuery::parse("db_move").unwrap(), &SearchFilter::persona("alice")).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].id.kind(), hits[0].snippet.as_str()), (HitKind::Memory, "DB: moving the 数据库"));
}

/// A conformance test; see the module.
pub fn search_candidates_stay_within_the_persona(subject: &Subject<'_>) {
    let backend = subject.backend;
    said(backend, "a1", "alice", &["the deployment failed on friday", "lunch was good"]);
    said(backend, "b1", "bob", &["the deployment of bob failed too"]);
    let space = EmbeddingSpace { model: "test-8d".into(), dimensions: 8 };
    assert!(backend.use_space(&space).unwrap());
    assert!(!backend.use_space(&space).unwrap());
    // The vectors are given, not computed: this checks where the store puts them and which it
    // hands back, not what a model makes of the texts.
    let items: Vec<(BacklogItem, Vec<Vec<f32>>)> = backend
        .backlog(None, None, 100)
        .unwrap()
        .into_iter()
        .map(|item| {
            let vector = if item.text.contains("deployment") {
                vec![1.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
            } else {
                vec![0.0, 0.0, 1.0, 0.2, 0.0, 0.0, 0.0, 0.0]
            };
            (item, vec![vector])
        })
        .collect();
    assert_eq!(items.len(), 3);
    assert!(matches!(backend.put_vectors("other-model", &items), Err(Error::Invalid { .. })));
    assert_eq!(backend.put_vectors("test-8d", &items).unwrap(), 3);
    assert!(backend.backlog(None, None, 100).unwrap().is_empty());
    let words = vec!["deployment".to_owned()];
    let query = CandidateQuery {
        filter: SearchFilter { kinds: vec![HitKind::Message], ..SearchFilter::persona("alice") },
        words: &words,
        vector: Some(("test-8d", &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])),
        scan: Scan::Exact,
        frequency_cap: 1000,
    };
    let found = backend.candidates(&query).unwrap();
    let nearest: Vec<&str> = found.semantic.iter().map(|(hit, _)| hit.snippet.as_str()).collect();
    assert_eq!(nearest, ["the deployment failed on friday", "lunch was good"]);
    assert!(found.semantic[0].1 < 0.01 && found.semantic[1].1 > 0.9, "{:?}", found.semantic);
    let keyword: Vec<&str> = found.keyword.iter().map(|(hit, _)| hit.snippet.as_str()).collect();
    assert_eq!(keyword, ["the deployment failed on friday"]);
    assert!(found.keyword[0].1 > 0.0);
    assert_eq!(found.space, Some(space));
    assert_eq!(found.waiting, 0);
}

/// A conformance test; see the module.
pub fn another_personas_words_never_move_the_scores(subject: &Subject<'_>) {
    let backend = subject.backend;
    said(
        backend,
        "a1",
        "alice",
        &[
            "the deployment failed on friday",
            "billing moved to the new cluster",
            "the deployment of billing is done",
        ],
    );
    let words = vec!["deployment".to_owned(), "billing".to_owned()];
    let keyword_side = || {
        let found = backend
            .candidates(&CandidateQuery {
                filter: SearchFilter { kinds: vec![HitKind::Message], ..SearchFilter::persona("alice") },
                words: &words,
                vector: None,
                scan: Scan::Exact,
                frequency_cap: 1000,
            })
            .unwrap();
        let scores: Vec<(String, f64)> =
            found.keyword.iter().map(|(hit, score)| (hit.snippet.clone(), *score)).collect();
        (scores, found.words[&HitKind::Message].clone())
    };
    let before = keyword_side();
    assert_eq!(before.0.len(), 3, "{before:?}");
    assert_eq!((before.1.rows, before.1.frequencies.clone()), (3, vec![2, 2]));
    // Bob's many, long rows make `deployment` common and `billing` rare across the database.
    let long = "the deployment was slow and then it was fast and then slow again ".repeat(8);
    let bobs: Vec<&str> = std::iter::repeat_n(long.as_str(), 40).collect();
    said(backend, "b1", "bob", &bobs);
    assert_eq!(keyword_side(), before, "alice's scores and statistics are alice's alone");
}

/// A conformance test; see the module.
pub fn a_compaction_lease_has_one_holder(subject: &Subject<'_>) {
    let backend = subject.backend;
    let one = backend.session("one", "alice").unwrap().id;
    let two = backend.session("two", "alice").unwrap().id;
    let lease = backend.compaction_lease(one).unwrap().expect("a free session's lease");
    assert!(backend.compaction_lease(one).unwrap().is_none());
    assert!(backend.compaction_lease(two).unwrap().is_some(), "another session's lease is its own");
    drop(lease);
    assert!(backend.compaction_lease(one).unwrap().is_some());
}

/// A conformance test; see the module.
pub fn bad_input_changes_nothing(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["a"]);
    let empty = NewSummary { headline: " ".into(), ..summary("x") };
    assert!(matches!(
        backend.insert_leaf(session, 0, 0, &empty),
        Err(Error::Invalid { field: "headline", .. })
    ));
    assert_eq!(backend.messages(session, 0..=0).unwrap()[0].summary_id, None);
    let bad_key = MemoryWrite { category: Category::Memo, key: "Not A Key", title: "t", content: "c" };
    assert!(matches!(
        backend.put_memory(Writer::Agent, "alice", &bad_key),
        Err(Error::Invalid { field: "key", .. })
    ));
    let tool_calls = NewMessage {
        tool_calls: Some(serde_json::json!({"not": "an array"})),
        ..NewMessage::text(Role::Assistant, "x")
    };
    assert!(backend.append(session, &[NewMessage::text(Role::User, "b"), tool_calls]).is_err());
    assert_eq!(backend.messages(session, 0..=i64::MAX).unwrap().len(), 1);
    assert!(backend.memories("alice", None).unwrap().is_empty());
}

/// A transcript's lines as an importer reads them: each with its line's digest.
fn transcript(key: &str, persona: &str, lines: &[&str]) -> Vec<IncomingMessage> {
    lines
        .iter()
        .map(|line| IncomingMessage {
            session_key: key.into(),
            persona: persona.into(),
            message: NewMessage::text(Role::User, *line),
            line_digest: Some(line_digest(line)),
        })
        .collect()
}

/// A conformance test; see the module.
pub fn an_import_run_again_adds_nothing_and_an_edited_one_is_refused(subject: &Subject<'_>) {
    let backend = subject.backend;
    let first = backend.import(&transcript("chat", "alice", &["one", "two", "three"])).unwrap();
    assert_eq!((first.ids.len(), first.skipped), (3, 0));
    let again = backend.import(&transcript("chat", "alice", &["one", "two", "three"])).unwrap();
    assert_eq!((again.ids.len(), again.skipped), (0, 3));
    // A longer version adds only its new lines.
    let longer = backend.import(&transcript("chat", "alice", &["one", "two", "three", "four"])).unwrap();
    assert_eq!((longer.ids.len(), longer.skipped), (1, 3));
    // An edited one is refused, naming where it differs; nothing is stored.
    let error = backend.import(&transcript("chat", "alice", &["one", "TWO", "three", "four"])).unwrap_err();
    assert!(matches!(error, Error::EditedTranscript { position: 2, .. }), "{error}");
    // Another persona may not write into the session.
    let error = backend.import(&transcript("chat", "bob", &["hi"])).unwrap_err();
    assert!(matches!(error, Error::PersonaMismatch { .. }), "{error}");
    let session = backend.find_session("chat").unwrap().unwrap();
    let texts: Vec<String> =
        backend.messages(session.id, 0..=i64::MAX).unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(texts, ["one", "two", "three", "four"]);
}

/// A conformance test; see the module.
pub fn an_export_holds_every_field_of_a_persona(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = backend.session("chat", "alice").unwrap();
    let keyed = NewMessage { external_id: Some("k1".into()), ..NewMessage::text(Role::User, "hello") };
    backend.append(session.id, &[keyed, NewMessage::text(Role::Assistant, "hi")]).unwrap();
    said(backend, "other", "bob", &["not alice's"]);
    let exported = backend.export_messages(ExportScope::Persona("alice")).unwrap();
    let rows: Vec<(&str, &str, &str, Option<&str>)> = exported
        .iter()
        .map(|e| {
            (e.session_key.as_str(), e.persona.as_str(), e.message.content.as_str(), e.external_id.as_deref())
        })
        .collect();
    assert_eq!(rows, [("chat", "alice", "hello", Some("k1")), ("chat", "alice", "hi", None)]);
    assert!(exported[0].created_at_seconds > 1.7e9, "{}", exported[0].created_at_seconds);
    assert_eq!(backend.export_messages(ExportScope::Session("other")).unwrap().len(), 1);
}

/// A conformance test; see the module.
pub fn forgetting_a_persona_erases_it_and_nothing_else(subject: &Subject<'_>) {
    let backend = subject.backend;
    let alice = said(backend, "a1", "alice", &["alice says ZEBRAFALCON", "again ZEBRAFALCON"]);
    let node = backend.insert_leaf(alice, 0, 1, &summary("ZEBRAFALCON summary")).unwrap();
    let memo = MemoryWrite { category: Category::Memo, key: "code", title: "Code", content: "ZEBRAFALCON" };
    backend
        .save_memory(Writer::Agent, "alice", &memo, &Provenance::agent("save_memory", alice, None, None))
        .unwrap();
    let updated = MemoryWrite { content: "ZEBRAFALCON, since May", ..memo };
    backend.save_memory(Writer::Agent, "alice", &updated, &Provenance::summary(node.id)).unwrap();
    let bob = said(backend, "b1", "bob", &["bob says BLUEMOOSE"]);
    let bob_memo = MemoryWrite { category: Category::Memo, key: "code", title: "Code", content: "BLUEMOOSE" };
    backend.put_memory(Writer::Agent, "bob", &bob_memo).unwrap();
    let scope = ForgetScope::Persona { persona: "alice".into() };
    let plan = backend.forget_plan(&scope).unwrap();
    assert_eq!((plan.counts.sessions, plan.counts.messages, plan.counts.summaries), (1, 2, 1));
    assert_eq!((plan.counts.memories, plan.counts.memory_versions), (1, 1));
    // A dry run changes nothing.
    assert_eq!(backend.messages(alice, 0..=i64::MAX).unwrap().len(), 2);
    let forgotten = backend.forget(&scope, "test", &[], &mut |_, _| {}).unwrap();
    assert_eq!(forgotten.counts, plan.counts);
    assert!(backend.find_session("a1").unwrap().is_none());
    assert!(backend.memories("alice", None).unwrap().is_empty());
    let hits =
        backend.grep(&TextQuery::parse("ZEBRAFALCON").unwrap(), &SearchFilter::persona("alice")).unwrap();
    assert!(hits.is_empty(), "{hits:?}");
    // Bob's rows are as they were.
    assert_eq!(backend.messages(bob, 0..=i64::MAX).unwrap()[0].content, "bob says BLUEMOOSE");
    assert_eq!(backend.memories("bob", None).unwrap()[0].content, "BLUEMOOSE");
    let audit = backend.forgets().unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!((audit[0].scope.as_str(), audit[0].persona.as_deref()), ("persona", Some("alice")));
    assert_eq!(audit[0].counts, plan.counts);
    // Nothing is left to forget: said, not done twice.
    assert!(matches!(backend.forget(&scope, "test", &[], &mut |_, _| {}), Err(Error::Invalid { .. })));
}

/// A conformance test; see the module.
pub fn forgetting_a_sessions_start_rewrites_the_node_that_keeps_messages(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = backend.session("chat", "alice").unwrap();
    let at = |seconds: i64| chrono::DateTime::from_timestamp(1_700_000_000 + seconds, 0).unwrap();
    let messages: Vec<NewMessage> = (0..4)
        .map(|i| NewMessage {
            created_at: at(i * 60),
            ..NewMessage::text(Role::User, format!("message {i}"))
        })
        .collect();
    backend.append(session.id, &messages).unwrap();
    let node = backend.insert_leaf(session.id, 0, 3, &summary("all four")).unwrap();
    let scope = ForgetScope::SessionBefore { key: "chat".into(), before: at(120) };
    let plan = backend.forget_plan(&scope).unwrap();
    assert_eq!((plan.counts.messages, plan.counts.rebuilt, plan.counts.sessions), (2, 1, 0));
    assert_eq!((plan.rebuild[0].first_seq, plan.rebuild[0].last_seq), (2, 3));
    let forgotten = backend.forget(&scope, "test", &[], &mut |_, _| {}).unwrap();
    assert_eq!(forgotten.markers, 1);
    let kept: Vec<(i64, String)> =
        backend.messages(session.id, 0..=i64::MAX).unwrap().into_iter().map(|m| (m.seq, m.content)).collect();
    assert_eq!(kept, [(2, "message 2".to_owned()), (3, "message 3".to_owned())]);
    let rewritten = backend.node(node.id).unwrap();
    assert_eq!((rewritten.first_seq, rewritten.last_seq), (2, 3));
    assert!(!rewritten.body.contains("all four"), "{}", rewritten.body);
    assert_eq!(rewritten.summarizer, "raw-archive");
    // The session numbers on after what it keeps.
    let next = backend.append(session.id, &[NewMessage::text(Role::User, "later")]).unwrap();
    assert_eq!(backend.message(next[0]).unwrap().seq, 4);
}

/// A conformance test; see the module.
pub fn messages_are_deleted_only_by_a_forget(subject: &Subject<'_>) {
    let backend = subject.backend;
    let session = said(backend, "chat", "alice", &["kept"]);
    // Outside a forget nothing deletes a message; a forget of nothing stored is refused.
    let scope = ForgetScope::Session { key: "missing".into() };
    assert!(matches!(backend.forget(&scope, "test", &[], &mut |_, _| {}), Err(Error::NotFound(_))));
    assert_eq!(backend.messages(session, 0..=i64::MAX).unwrap().len(), 1);
    assert!(backend.forgets().unwrap().is_empty());
}

/// A conformance test; see the module.
pub fn usage_is_summed_per_day_purpose_caller_and_model(subject: &Subject<'_>) {
    let backend = subject.backend;
    use crate::stats::LlmCall;
    use chrono::TimeZone;
    let call = |day: u32, hour: u32, ok: bool, prompt: Option<u64>| LlmCall {
        at: chrono::Utc.with_ymd_and_hms(2026, 3, day, hour, 30, 0).unwrap(),
        purpose: "summary".into(),
        caller: "extractive".into(),
        model: "gpt-test".into(),
        ok,
        prompt_tokens: prompt,
        completion_tokens: Some(10),
        counted_prompt_tokens: Some(100),
        counted_completion_tokens: Some(9),
        millis: 250,
    };
    // Two calls on 1 March (one failed, one without the server's count), one late on 2 March.
    backend
        .record_llm_calls(&[
            call(1, 8, true, Some(120)),
            call(1, 23, false, None),
            call(2, 23, true, Some(80)),
        ])
        .unwrap();
    let days = backend.usage_by_day().unwrap();
    let summed: Vec<_> = days
        .iter()
        .map(|day| {
            let t = &day.totals;
            (
                day.day.as_str(),
                t.calls,
                t.failures,
                t.prompt_tokens,
                t.completion_tokens,
                t.millis,
                day.counted_prompt_tokens,
            )
        })
        .collect();
    assert_eq!(summed, [("2026-03-02", 1, 0, 80, 10, 250, 100), ("2026-03-01", 2, 1, 120, 20, 500, 200)]);
}

/// A conformance test; see the module.
pub fn a_stated_preference_is_proposed_once_per_key(subject: &Subject<'_>) {
    let backend = subject.backend;
    let stated = |key: &str, content: &str| MemoryUpdate {
        category: Category::UserPreferences,
        key: key.into(),
        title: "Language".into(),
        content: content.into(),
        edit: None,
    };
    backend.propose_stated("ana", &stated("answer_language", "Answer in French.")).unwrap();
    // Said again in other words: the open proposal of the key is replaced, not doubled.
    backend.propose_stated("ana", &stated("answer_language", "Always answer in French, please.")).unwrap();
    let proposals = backend.proposals("ana").unwrap();
    assert_eq!(proposals.len(), 1, "{proposals:?}");
    assert_eq!(proposals[0].update.content, "Always answer in French, please.");
    assert!(proposals[0].proposed && proposals[0].node_id.is_none());
    assert!(backend.proposals("bob").unwrap().is_empty(), "another persona sees none");
    // A key a memory may not have is refused and changes nothing.
    assert!(backend.propose_stated("ana", &stated("Not A Key!", "x")).is_err());
    assert_eq!(backend.proposals("ana").unwrap().len(), 1);
    assert!(
        backend.memory("ana", Category::UserPreferences, "answer_language").unwrap().is_none(),
        "only proposed"
    );
}
