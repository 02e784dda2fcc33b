//! The invariants PostgreSQL itself enforces, whoever writes: a client that goes around strata
//! with plain SQL still cannot rewrite or delete a message, re-cover a covered one, move a
//! merged node, or store a second memory under one key.

mod common;

use strata_pg::PgStore;
use strata_store::memories::{MemoryWrite, Writer};
use strata_store::{Backend, Category, NewMessage, NewSummary, Role};

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
