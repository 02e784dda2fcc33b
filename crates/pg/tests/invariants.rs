//! The invariants PostgreSQL itself enforces, whoever writes: a client that goes around strata
//! with plain SQL still cannot rewrite or delete a message, re-cover a covered one, move a
//! merged node, or store a second memory under one key.

mod common;

use strata_pg::PgStore;
use strata_seam::forgetting::ForgetScope;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_seam::{Category, Maintenance, NewMessage, NewSummary, Role};
use strata_seam::{Conversations, Forest, Memories};

#[test]
fn the_server_refuses_what_strata_never_does() {
    let (server, url, name) = common::new_database();
    let store = PgStore::open(&url).unwrap();
    let session = store.session("chat", "alice").unwrap();
    store
        .append(session.id, &[NewMessage::text(Role::User, "a"), NewMessage::text(Role::User, "b")])
        .unwrap();
    let summary = NewSummary {
        headline: "a and b".into(),
        body: "- a, b".into(),
        token_count: 3,
        summarizer: "extractive".into(),
        memory_updates: Vec::new(),
    };
    let leaf = store.insert_leaf(session.id, 0, 0, &summary).unwrap();
    let other = store.insert_leaf(session.id, 1, 1, &summary).unwrap();
    store.merge(&[leaf.id, other.id], &summary).unwrap();
    store
        .put_memory(
            Writer::User,
            "alice",
            &MemoryWrite { category: Category::Memo, key: "k", title: "t", content: "c" },
        )
        .unwrap();

    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let refused = |sql: &mut postgres::Client, statement: &str| {
        let error = sql.batch_execute(statement).expect_err(statement);
        error.as_db_error().map(|e| e.message().to_owned()).unwrap_or_else(|| error.to_string())
    };
    assert_eq!(
        refused(&mut sql, "UPDATE messages SET content = 'forged' WHERE seq = 0"),
        "message content is never rewritten"
    );
    assert_eq!(refused(&mut sql, "DELETE FROM messages"), "messages are append-only");
    assert_eq!(refused(&mut sql, "TRUNCATE messages CASCADE"), "messages are append-only");
    // A forget's audit row opens the guard only while it is open, and a transaction may not
    // commit leaving it open: going around `forget` leaves nothing deleted.
    assert!(
        refused(
            &mut sql,
            "BEGIN;
             INSERT INTO forgets(command, scope, started_at, open_in) VALUES ('psql', 'session', 0, txid_current());
             DELETE FROM messages;
             COMMIT;"
        )
        .contains("left unfinished")
    );
    assert!(
        refused(&mut sql, &format!("UPDATE messages SET summary_id = {} WHERE seq = 0", other.id))
            .contains("already covered")
    );
    assert!(
        refused(&mut sql, "UPDATE summary_nodes SET parent_id = NULL WHERE level = 0")
            .contains("already merged")
    );
    assert!(
        refused(
            &mut sql,
            "INSERT INTO agent_memories(persona, category, key, title, content, updated_at, folded)
         VALUES ('alice', 'memo', 'k', 't', 'again', 0, 'again')"
        )
        .contains("duplicate key")
    );
    // Everything is as it was.
    let texts: Vec<String> =
        store.messages(session.id, 0..=9).unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(texts, ["a", "b"]);
    assert_eq!(store.memories("alice", None).unwrap().len(), 1);
    drop((store, sql));
    postgres::Client::connect(&server, postgres::NoTls)
        .unwrap()
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .unwrap();
}

/// Every file of the database's own directory (its tables, their TOAST tables and indexes).
fn database_files(sql: &mut postgres::Client) -> Vec<std::path::PathBuf> {
    let dir: String = sql.query_one("SHOW data_directory", &[]).unwrap().get(0);
    let oid: u32 =
        sql.query_one("SELECT oid FROM pg_database WHERE datname = current_database()", &[]).unwrap().get(0);
    let base = std::path::Path::new(&dir).join("base").join(oid.to_string());
    let entries = std::fs::read_dir(&base).unwrap_or_else(|error| {
        panic!("the test server's files at {} (a local server): {error}", base.display())
    });
    entries.map(|entry| entry.unwrap().path()).collect()
}

/// The relation a data file belongs to (by its file node), for a failure's message.
fn relation_of(sql: &mut postgres::Client, file: &std::path::Path) -> String {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let node: Option<u32> = name.split(['.', '_']).next().and_then(|node| node.parse().ok());
    let Some(node) = node else { return format!("{name}: not a relation's file") };
    sql.query_one("SELECT coalesce(pg_filenode_relation(0, $1)::regclass::text, '(none)')", &[&node])
        .map(|row| row.get(0))
        .unwrap_or_else(|error| format!("{name}: {error}"))
}

fn files_holding(files: &[std::path::PathBuf], needle: &str) -> Vec<std::path::PathBuf> {
    files
        .iter()
        .filter(|path| {
            std::fs::read(path)
                .map(|bytes| bytes.windows(needle.len()).any(|window| window == needle.as_bytes()))
                .unwrap_or(false)
        })
        .cloned()
        .collect()
}

#[test]
fn after_forgetting_a_persona_no_table_or_index_file_holds_its_words() {
    let (url, _database) = common::scratch_database();
    let store = PgStore::open(&url).unwrap();
    // A long message that does not compress goes to the TOAST table, out of line.
    let noise: String =
        (0..12_000u32).map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26)).collect();
    let alice = store.session("a1", "alice").unwrap();
    store
        .append(
            alice.id,
            &[
                NewMessage::text(Role::User, "my codename is ZEBRAFALCON"),
                NewMessage::text(Role::User, format!("{noise} KESTRELTOAST {noise}")),
            ],
        )
        .unwrap();
    let summary = NewSummary {
        headline: "codename ZEBRAFALCON".into(),
        body: "- ZEBRAFALCON, KESTRELTOAST".into(),
        token_count: 5,
        summarizer: "extractive".into(),
        memory_updates: Vec::new(),
    };
    store.insert_leaf(alice.id, 0, 1, &summary).unwrap();
    let memo =
        MemoryWrite { category: Category::Memo, key: "codename", title: "Codename", content: "ZEBRAFALCON" };
    store.put_memory(Writer::User, "alice", &memo).unwrap();
    let bob = store.session("b1", "bob").unwrap();
    store.append(bob.id, &[NewMessage::text(Role::User, "bob's word is BLUEMOOSE")]).unwrap();

    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    sql.batch_execute("CHECKPOINT").unwrap();
    let files = database_files(&mut sql);
    assert!(!files_holding(&files, "ZEBRAFALCON").is_empty(), "the words are on disk before the forget");
    assert!(
        !files_holding(&files, "KESTRELTOAST").is_empty(),
        "the long message is on disk before the forget"
    );

    let forgotten =
        store.forget(&ForgetScope::Persona { persona: "alice".into() }, "test", &[], &mut |_, _| {}).unwrap();
    assert_eq!(forgotten.counts.messages, 2);
    assert!(forgotten.wal_truncated, "the tables were rewritten and checkpointed");
    let files = database_files(&mut sql);
    for word in ["ZEBRAFALCON", "KESTRELTOAST", "codename is"] {
        let holding = files_holding(&files, word);
        let relations: Vec<String> = holding.iter().map(|file| relation_of(&mut sql, file)).collect();
        assert!(holding.is_empty(), "{word} is still on disk in {holding:?}: {relations:?}");
    }
    // Bob's rows are unchanged, on disk and through strata.
    assert!(!files_holding(&files, "BLUEMOOSE").is_empty());
    assert_eq!(store.messages(bob.id, 0..=9).unwrap()[0].content, "bob's word is BLUEMOOSE");
}
