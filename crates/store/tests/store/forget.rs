//! Forgetting: the one path that deletes messages. After it, nothing of what was forgotten is
//! left in the file's bytes, what was kept is unchanged, and the database stays healthy.

use chrono::{Duration, TimeZone, Utc};
use strata_seam::embeddings::EmbeddingSpace;
use strata_seam::forgetting::ForgetScope;
use strata_seam::memories::{MemoryUpdate, MemoryWrite, Writer};
use strata_seam::{Category, Error, NewMessage, NewSummary, Role};
use strata_store::Store;

use crate::temp_store;
use strata_seam::{Conversations, Forest, Maintenance, Memories, Search, Vectors};

const DIMS: usize = 16;

fn message(i: usize, text: &str) -> NewMessage {
    let mut message =
        NewMessage::text(if i.is_multiple_of(2) { Role::User } else { Role::Assistant }, text.to_owned());
    message.token_count = 20;
    message.created_at = Utc.with_ymd_and_hms(2025, 3, 1, 9, 0, 0).unwrap() + Duration::minutes(i as i64);
    message
}

fn leaf(headline: &str, updates: Vec<MemoryUpdate>) -> NewSummary {
    NewSummary {
        headline: headline.to_owned(),
        body: format!("- {headline} in detail"),
        token_count: 10,
        summarizer: "extractive".to_owned(),
        memory_updates: updates,
    }
}

/// A persona's words: unique to it, so finding one in the file means it was not forgotten.
fn secret(persona: &str, what: &str, i: usize) -> String {
    format!("{persona}Secret{what}Quokka{i:03}")
}

/// Stores a session of `persona` with 8 messages, two Level-0 nodes merged into one, a queued
/// fact, a memory, vectors for everything, and the search indexes caught up.
fn populate(store: &Store, persona: &str) {
    let session = store.session(&format!("{persona}-chat"), persona).unwrap();
    let messages: Vec<NewMessage> = (0..8)
        .map(|i| {
            message(i, &format!("message {i}: the code word is {} today", secret(persona, "Message", i)))
        })
        .collect();
    store.append(session.id, &messages).unwrap();
    let fact = MemoryUpdate {
        category: Category::Memo,
        key: "code_word".into(),
        title: "Code word".into(),
        content: secret(persona, "Fact", 0),
        edit: None,
    };
    let a = store.insert_leaf(session.id, 0, 3, &leaf(&secret(persona, "Summary", 0), vec![fact])).unwrap();
    let b = store.insert_leaf(session.id, 4, 7, &leaf(&secret(persona, "Summary", 1), Vec::new())).unwrap();
    store.merge(&[a.id, b.id], &leaf(&secret(persona, "Summary", 2), Vec::new())).unwrap();
    let memory = secret(persona, "Memory", 0);
    let write = MemoryWrite {
        category: Category::Progress,
        key: "current_task",
        title: "Current task",
        content: &memory,
    };
    store.put_memory(Writer::User, persona, &write).unwrap();
    store.catch_up_search_index().unwrap();
    let space = EmbeddingSpace { model: "test-model".into(), dimensions: DIMS };
    store.use_space(&space).unwrap();
    let backlog = store.backlog(Some(persona), None, 1000).unwrap();
    let items: Vec<_> = backlog
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let mut vector = vec![0.1f32; DIMS];
            vector[i % DIMS] = 1.0;
            (item, vec![vector])
        })
        .collect();
    store.put_vectors("test-model", &items).unwrap();
}

/// The database file and its `-wal`, as bytes.
fn file_bytes(store: &Store) -> Vec<u8> {
    let mut bytes = std::fs::read(store.path()).unwrap();
    let mut wal = store.path().as_os_str().to_owned();
    wal.push("-wal");
    if let Ok(more) = std::fs::read(&wal) {
        bytes.extend(more);
    }
    bytes
}

fn occurs(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle.as_bytes())
}

/// What a persona holds, as the tools would read it.
fn holdings(store: &Store, persona: &str) -> String {
    let session = store.find_session(&format!("{persona}-chat")).unwrap().unwrap();
    let messages = store.all_messages(session.id).unwrap();
    let nodes = store.nodes(session.id).unwrap();
    let memories = store.memories(persona, None).unwrap();
    format!("{messages:?}\n{nodes:?}\n{memories:?}")
}

#[test]
fn forgetting_a_persona_leaves_none_of_its_bytes_and_the_other_unchanged() {
    let (_dir, store) = temp_store();
    populate(&store, "alice");
    populate(&store, "bob");
    let bob_before = holdings(&store, "bob");
    let bytes = file_bytes(&store);
    let alice: Vec<String> = (0..8)
        .map(|i| secret("alice", "Message", i))
        .chain((0..3).map(|i| secret("alice", "Summary", i)))
        .chain([secret("alice", "Memory", 0), secret("alice", "Fact", 0)])
        .collect();
    assert!(alice.iter().all(|text| occurs(&bytes, text)), "the scan finds what is stored");

    let scope = ForgetScope::Persona { persona: "alice".into() };
    let plan = store.forget_plan(&scope).unwrap();
    assert_eq!(
        (plan.counts.sessions, plan.counts.messages, plan.counts.summaries, plan.counts.memories),
        (1, 8, 3, 1)
    );
    assert_eq!(plan.counts.proposals, 1, "the queued fact of alice's node");
    assert_eq!(plan.counts.vectors, 8 + 3 + 1);
    assert_eq!(holdings(&store, "bob"), bob_before, "a dry run changes nothing");
    let mut heard = Vec::new();
    let forgotten = store.forget(&scope, "test", &[], &mut |done, total| heard.push((done, total))).unwrap();
    assert_eq!(forgotten.counts, plan.counts);
    assert!(forgotten.wal_truncated);
    assert_eq!(heard.last(), Some(&(8, 8)));

    let bytes = file_bytes(&store);
    let left: Vec<&String> = alice.iter().filter(|text| occurs(&bytes, text)).collect();
    assert!(left.is_empty(), "still in the file: {left:?}");
    // Not even a word of it in the word index: its distinctive words are gone too.
    assert!(!occurs(&bytes, "alicesecretmessagequokka"), "a stemmed word of alice's is left");
    assert_eq!(holdings(&store, "bob"), bob_before);
    assert!(store.find_session("alice-chat").unwrap().is_none());
    assert!(store.memories("alice", None).unwrap().is_empty());
    let report = store.doctor(true).unwrap();
    assert!(report.healthy(), "{report:?}");
    let audit = store.forgets().unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!((audit[0].scope.as_str(), audit[0].persona.as_deref()), ("persona", Some("alice")));
    assert_eq!(audit[0].counts, forgotten.counts);
    assert!(audit[0].finished_at.is_some());
}

#[test]
fn forgetting_the_start_of_a_session_rewrites_the_node_that_keeps_messages() {
    let (_dir, store) = temp_store();
    populate(&store, "alice");
    let session = store.find_session("alice-chat").unwrap().unwrap();
    // Messages 0..=5 go: the first node whole, the second keeps 6 and 7, the merge dissolves.
    let before = Utc.with_ymd_and_hms(2025, 3, 1, 9, 6, 0).unwrap();
    let scope = ForgetScope::SessionBefore { key: "alice-chat".into(), before };
    let plan = store.forget_plan(&scope).unwrap();
    assert_eq!((plan.counts.messages, plan.counts.summaries, plan.counts.rebuilt), (6, 2, 1));
    assert_eq!((plan.rebuild[0].first_seq, plan.rebuild[0].last_seq), (6, 7));
    let forgotten = store.forget(&scope, "test", &[], &mut |_, _| {}).unwrap();
    assert_eq!(forgotten.markers, 1);

    let kept: Vec<i64> = store.all_messages(session.id).unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(kept, vec![6, 7]);
    let nodes = store.nodes(session.id).unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!((nodes[0].first_seq, nodes[0].last_seq, nodes[0].parent_id), (6, 7, None));
    assert_eq!(nodes[0].summarizer, "raw-archive", "a marker, summarized again by the next compaction");
    assert!(!nodes[0].headline.contains("Quokka"));
    let bytes = file_bytes(&store);
    for text in
        (0..6).map(|i| secret("alice", "Message", i)).chain((0..3).map(|i| secret("alice", "Summary", i)))
    {
        assert!(!occurs(&bytes, &text), "{text} is still in the file");
    }
    assert!(occurs(&bytes, &secret("alice", "Message", 7)), "kept messages stay");
    let report = store.doctor(true).unwrap();
    assert!(report.healthy(), "{report:?}");
    // The session numbers on after what it keeps.
    let ids = store.append(session.id, &[message(9, "later")]).unwrap();
    assert_eq!(store.message(ids[0]).unwrap().seq, 8);
    // Forgetting everything of it keeps the session, numbering on.
    let everything = ForgetScope::SessionBefore { key: "alice-chat".into(), before: Utc::now() };
    store.forget(&everything, "test", &[], &mut |_, _| {}).unwrap();
    assert!(store.all_messages(session.id).unwrap().is_empty());
    let ids = store.append(session.id, &[message(10, "after")]).unwrap();
    assert_eq!(store.message(ids[0]).unwrap().seq, 9);
    assert!(store.doctor(false).unwrap().healthy());
}

#[test]
fn only_forget_deletes_messages_even_through_sql() {
    let (dir, store) = temp_store();
    populate(&store, "alice");
    drop(store);
    let mut conn = rusqlite::Connection::open(dir.path().join("strata.db")).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    let refused = conn.execute("DELETE FROM messages", []).unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    // Opening the guard by hand and leaving it open cannot commit: the deferred key refuses.
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO forgets(command, scope, started_at, open) VALUES ('hand', 'persona', 0, 1)", [])
        .unwrap();
    tx.execute("DELETE FROM messages WHERE seq = 7", []).unwrap();
    assert!(tx.commit().is_err(), "a transaction that leaves the guard open cannot commit");
    let count: i64 = conn.query_row("SELECT count(*) FROM messages", [], |row| row.get(0)).unwrap();
    assert_eq!(count, 8);
    assert!(conn.execute("INSERT INTO forget_gate(id) VALUES (1)", []).is_err(), "the gate stays empty");
}

#[test]
fn forgetting_what_does_not_exist_is_one_clear_error_and_changes_nothing() {
    let (_dir, store) = temp_store();
    populate(&store, "alice");
    let before = holdings(&store, "alice");
    let missing = store.forget(&ForgetScope::Session { key: "nope".into() }, "test", &[], &mut |_, _| {});
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");
    let nobody =
        store.forget(&ForgetScope::Persona { persona: "nobody".into() }, "test", &[], &mut |_, _| {});
    assert!(matches!(nobody, Err(Error::Invalid { field: "persona", .. })), "{nobody:?}");
    let bad = store.forget(&ForgetScope::Persona { persona: "no body".into() }, "test", &[], &mut |_, _| {});
    assert!(matches!(bad, Err(Error::Invalid { .. })), "{bad:?}");
    assert_eq!(holdings(&store, "alice"), before);
    assert!(store.forgets().unwrap().is_empty(), "no audit row for what did not happen");
}

#[test]
fn forgetting_a_session_keeps_the_personas_other_sessions_and_memories() {
    let (_dir, store) = temp_store();
    populate(&store, "alice");
    let other = store.session("alice-other", "alice").unwrap();
    store.append(other.id, &[message(0, "another conversation")]).unwrap();
    let forgotten = store
        .forget(&ForgetScope::Session { key: "alice-chat".into() }, "test", &[], &mut |_, _| {})
        .unwrap();
    assert_eq!((forgotten.counts.sessions, forgotten.counts.messages), (1, 8));
    assert!(store.find_session("alice-chat").unwrap().is_none());
    assert_eq!(store.all_messages(other.id).unwrap().len(), 1);
    assert_eq!(store.memories("alice", None).unwrap().len(), 1, "memories belong to the persona");
    assert!(store.doctor(false).unwrap().healthy());
}

/// A large forget rebuilds the search indexes from what remains: nothing of it is left in the
/// file, the kept rows are still found, and the indexes check out.
#[test]
fn a_large_forget_rebuilds_the_indexes_and_leaves_no_bytes() {
    let (_dir, store) = temp_store();
    populate(&store, "bob");
    let alice = store.session("alice-big", "alice").unwrap();
    let messages: Vec<NewMessage> =
        (0..1_200).map(|i| message(i, &format!("big {}", secret("alice", "Bulk", i)))).collect();
    store.append(alice.id, &messages).unwrap();
    store.insert_leaf(alice.id, 0, 99, &leaf(&secret("alice", "BigSummary", 0), Vec::new())).unwrap();
    store.catch_up_search_index().unwrap();
    let bob_before = holdings(&store, "bob");
    let forgotten =
        store.forget(&ForgetScope::Persona { persona: "alice".into() }, "test", &[], &mut |_, _| {}).unwrap();
    assert_eq!(forgotten.counts.messages, 1_200);
    let bytes = file_bytes(&store);
    // Every forgotten word starts so (one scan each, not 1,200).
    let left: Vec<&str> = ["aliceSecretBulkQuokka", "alicesecretbulkquokka", "aliceSecretBigSummaryQuokka"]
        .into_iter()
        .filter(|text| occurs(&bytes, text))
        .collect();
    assert!(left.is_empty(), "still in the file: {left:?}");
    assert_eq!(holdings(&store, "bob"), bob_before);
    let filter = strata_seam::search::SearchFilter::persona("bob");
    let query = strata_seam::search::TextQuery::parse(&secret("bob", "Message", 3)).unwrap();
    assert_eq!(store.grep(&query, &filter).unwrap().len(), 1, "bob's rows are in the rebuilt index");
    assert!(store.doctor(true).unwrap().healthy());
}

/// Every write records its source; an update keeps the earlier text; forgetting the session a
/// memory came from removes it and its history, and an earlier version from it alone.
#[test]
fn memories_keep_their_sources_and_history_and_forgetting_removes_them() {
    use strata_seam::NodeId;
    use strata_seam::memories::{Provenance, Source};
    let (_dir, store) = temp_store();
    populate(&store, "alice");
    let session = store.find_session("alice-chat").unwrap().unwrap();
    let node: NodeId = store.nodes(session.id).unwrap()[0].id;
    let write = |key: &'static str, content: &'static str| MemoryWrite {
        category: Category::Memo,
        key,
        title: "Title",
        content,
    };
    // Written by the user, then updated from a summary node of the session.
    store.save_memory(Writer::User, "alice", &write("deploy", "Fridays."), &Provenance::user("cli")).unwrap();
    let (updated, created) = store
        .save_memory(Writer::Agent, "alice", &write("deploy", "Thursdays now."), &Provenance::summary(node))
        .unwrap();
    assert!(!created);
    let source = updated.provenance.clone().unwrap();
    assert_eq!((source.source, source.node, source.session), (Source::Summary, Some(node), Some(session.id)));
    assert!(source.first_seq.is_some() && source.last_seq.is_some(), "the messages it came from");
    let history = store.memory_history("alice", Category::Memo, "deploy").unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!((history[0].content.as_str(), history[0].replaced_at), ("Thursdays now.", None));
    assert_eq!(history[1].content, "Fridays.", "the update kept the earlier text");
    assert_eq!(history[1].provenance.source, Source::User);
    assert!(history[1].replaced_at.is_some());
    // Saved by the agent in the session: the message is the session's newest.
    let (by_tool, _) = store
        .save_memory(
            Writer::Agent,
            "alice",
            &write("tool_fact", "From a tool call."),
            &Provenance::agent("save_memory", session.id, None, Some("call_9".into())),
        )
        .unwrap();
    let newest = store.all_messages(session.id).unwrap().last().unwrap().id;
    assert_eq!(by_tool.provenance.as_ref().unwrap().message, Some(newest));
    // The user rewrites a memory whose first version came from the session.
    store
        .save_memory(Writer::Agent, "alice", &write("kept", "From the chat."), &Provenance::summary(node))
        .unwrap();
    store
        .save_memory(Writer::User, "alice", &write("kept", "The user's own words."), &Provenance::user("cli"))
        .unwrap();
    let listed = store.memories("alice", Some(Category::Memo)).unwrap();
    assert!(listed.iter().all(|memory| memory.provenance.is_some()), "every memory has a source");

    let plan = store.forget_plan(&ForgetScope::Session { key: "alice-chat".into() }).unwrap();
    assert_eq!(plan.counts.memories, 1, "tool_fact came from the session only");
    store.forget(&ForgetScope::Session { key: "alice-chat".into() }, "test", &[], &mut |_, _| {}).unwrap();
    assert!(store.memory("alice", Category::Memo, "tool_fact").unwrap().is_none());
    // The user's earlier text is what deploy keeps (issue 42: it went with the session's).
    let deploy = store.memory_history("alice", Category::Memo, "deploy").unwrap();
    assert_eq!(deploy.len(), 1, "{deploy:?}");
    assert_eq!((deploy[0].content.as_str(), deploy[0].replaced_at), ("Fridays.", None));
    assert_eq!(store.memory("alice", Category::Memo, "deploy").unwrap().unwrap().content, "Fridays.");
    let kept = store.memory_history("alice", Category::Memo, "kept").unwrap();
    assert_eq!(kept.len(), 1, "the version from the forgotten session is gone: {kept:?}");
    assert_eq!(kept[0].content, "The user's own words.");
    let bytes = file_bytes(&store);
    for text in ["Thursdays now.", "From a tool call.", "From the chat."] {
        assert!(!occurs(&bytes, text), "{text} is still in the file");
    }
    assert!(store.doctor(false).unwrap().healthy());
}

/// Issue 42 #1: a memory that two sessions wrote keeps none of the forgotten session's text,
/// in its key, its title or any version's title, and loses none of the other session's: a
/// twin update is relabelled with the key and title its writer proposed, and a memory the
/// forgotten session only updated goes back to the kept session's text.
#[test]
fn forgetting_a_session_rewrites_memories_another_session_shares_from_what_remains() {
    use strata_seam::memories::Provenance;
    let (_dir, store) = temp_store();
    let a = store.session("alice-a", "alice").unwrap();
    let b = store.session("alice-b", "alice").unwrap();
    store.append(a.id, &[message(0, "ErasedQuokkaMessage"), message(1, "ok")]).unwrap();
    store.append(b.id, &[message(0, "kept message"), message(1, "ok")]).unwrap();
    let node_a = store.insert_leaf(a.id, 0, 1, &leaf("ErasedQuokkaNode", Vec::new())).unwrap().id;
    let node_b = store.insert_leaf(b.id, 0, 1, &leaf("kept node", Vec::new())).unwrap().id;
    let write = |key: &'static str, title: &'static str, content: &'static str| MemoryWrite {
        category: Category::Memo,
        key,
        title,
        content,
    };
    // Session A names a memory; session B's fact, a near-duplicate, updates it under A's label.
    store
        .save_memory(
            Writer::Agent,
            "alice",
            &write("erasedquokkakey", "ErasedQuokkaTitle", "ErasedQuokkaContent"),
            &Provenance::summary(node_a),
        )
        .unwrap();
    store
        .save_memory(
            Writer::Agent,
            "alice",
            &write("erasedquokkakey", "ErasedQuokkaTitle", "Deploys go out on Thursdays."),
            &Provenance::summary(node_b).merged_into_twin("deploy_day", "Deploy day", "by spelling"),
        )
        .unwrap();
    // Session B names a memory; session A updates it under B's own label.
    store
        .save_memory(
            Writer::Agent,
            "alice",
            &write("editor", "Editor", "Helix."),
            &Provenance::summary(node_b),
        )
        .unwrap();
    store
        .save_memory(
            Writer::Agent,
            "alice",
            &write("editor", "Editor", "ErasedQuokkaEditor"),
            &Provenance::summary(node_a),
        )
        .unwrap();
    store.catch_up_search_index().unwrap();

    let plan = store.forget_plan(&ForgetScope::Session { key: "alice-a".into() }).unwrap();
    assert_eq!((plan.counts.memories, plan.counts.memory_versions), (0, 2), "{plan:?}");
    store.forget(&ForgetScope::Session { key: "alice-a".into() }, "test", &[], &mut |_, _| {}).unwrap();

    assert!(store.memory("alice", Category::Memo, "erasedquokkakey").unwrap().is_none());
    let relabelled = store.memory("alice", Category::Memo, "deploy_day").unwrap().expect("B's text is kept");
    assert_eq!(
        (relabelled.title.as_str(), relabelled.content.as_str()),
        ("Deploy day", "Deploys go out on Thursdays.")
    );
    let history = store.memory_history("alice", Category::Memo, "deploy_day").unwrap();
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!((history[0].title.as_str(), history[0].replaced_at), ("Deploy day", None));
    let editor = store.memory("alice", Category::Memo, "editor").unwrap().expect("B's memory is kept");
    assert_eq!((editor.title.as_str(), editor.content.as_str()), ("Editor", "Helix."));
    let history = store.memory_history("alice", Category::Memo, "editor").unwrap();
    assert_eq!((history.len(), history[0].replaced_at), (1, None), "{history:?}");
    // Found by search under what it keeps, not what went.
    let found = store.memories("alice", None).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    let bytes = file_bytes(&store);
    for text in ["ErasedQuokka", "erasedquokkakey"] {
        assert!(!occurs(&bytes, text), "{text} is still in the file");
    }
    assert!(store.doctor(false).unwrap().healthy());
}
