//! A fleet of processes on one PostgreSQL database: four `strata-pg-fleet` processes append
//! to, compact, embed and search the same sessions at once; afterwards nothing is lost,
//! nothing is duplicated, no two compactions of one session overlapped, and every invariant of
//! the forest holds.

mod common;

use std::collections::HashMap;
use std::process::Command;

use strata_pg::PgStore;
use strata_seam::Level;
use strata_seam::{Conversations, Forest};

const WORKERS: usize = 4;
const OPERATIONS: usize = 60;
const SESSIONS: usize = 3;

#[test]
fn four_processes_share_one_database_without_losing_duplicating_or_overlapping() {
    let (server, url, name) = common::new_database();
    let store = PgStore::open(&url).unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute("CREATE TABLE fleet_leases (session BIGINT PRIMARY KEY)").unwrap();

    let children: Vec<_> = (0..WORKERS)
        .map(|worker| {
            Command::new(env!("CARGO_BIN_EXE_strata-pg-fleet"))
                .args([&url, &worker.to_string(), &OPERATIONS.to_string(), &SESSIONS.to_string()])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut totals: HashMap<String, usize> = HashMap::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "a worker failed: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for pair in stdout.split_whitespace() {
            let (key, value) = pair.split_once('=').unwrap();
            *totals.entry(key.to_owned()).or_default() += value.parse::<usize>().unwrap();
        }
    }
    eprintln!("fleet of {WORKERS} processes: {totals:?}");
    assert_eq!(totals["overlaps"], 0, "two compactions of one session overlapped");
    assert_eq!(totals["errors"], 0, "a compaction under the lease failed");
    assert!(totals["compactions"] > 0 && totals["searches"] > 0 && totals["embedded"] > 0, "{totals:?}");

    // Nothing lost, nothing duplicated: every message once, seqs dense.
    let mut messages = 0;
    for index in 0..SESSIONS {
        let session = store.session(&format!("fleet-{index}"), "fleet").unwrap();
        let stored = store.messages(session.id, 0..=i64::MAX).unwrap();
        let seqs: Vec<i64> = stored.iter().map(|m| m.seq).collect();
        assert_eq!(seqs, (0..stored.len() as i64).collect::<Vec<_>>(), "seqs of session {index} are dense");
        messages += stored.len();
        // The forest: every leaf covers exactly its range and the leaves are disjoint.
        let mut covered_by: HashMap<i64, i64> = HashMap::new();
        for message in &stored {
            if let Some(node) = message.summary_id {
                covered_by.insert(message.seq, node.0);
            }
        }
        let leaves: Vec<i64> = client
            .query("SELECT id FROM summary_nodes WHERE session_id = $1 AND level = 0", &[&session.id.0])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        for leaf in leaves {
            check_leaf(&store, strata_seam::NodeId(leaf), &covered_by);
        }
    }
    let expected = WORKERS * OPERATIONS * 3;
    assert_eq!(messages, expected);
    assert_eq!(totals["appended"], expected);
    let distinct: i64 =
        client.query_one("SELECT count(DISTINCT external_id) FROM messages", &[]).unwrap().get(0);
    assert_eq!(distinct as usize, expected);
    // Every vector row is one chunk of a row that exists, once.
    let orphans: i64 = client
        .query_one(
            "SELECT count(*) FROM embeddings e WHERE kind = 'message'
             AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = e.item_id)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(orphans, 0);
    // Every parent is one level above its children and spans exactly their seqs.
    let misfits: i64 = client
        .query_one(
            "SELECT count(*) FROM summary_nodes p JOIN LATERAL (
                 SELECT min(c.first_seq) AS first, max(c.last_seq) AS last, count(*) AS n,
                        bool_and(c.level = p.level - 1) AS levels
                 FROM summary_nodes c WHERE c.parent_id = p.id) c ON true
             WHERE p.level > 0 AND (c.n < 2 OR NOT c.levels OR c.first <> p.first_seq OR c.last <> p.last_seq)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(misfits, 0);
    drop((store, client));
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)")).unwrap();
}

fn check_leaf(store: &PgStore, id: strata_seam::NodeId, covered_by: &HashMap<i64, i64>) {
    let node = store.node(id).unwrap();
    assert_eq!(node.level, Level::LEAF);
    let covered: Vec<i64> = store.covered_messages(id).unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(covered, (node.first_seq..=node.last_seq).collect::<Vec<_>>(), "leaf {id} covers its range");
    assert!(covered.iter().all(|seq| covered_by[seq] == id.0));
}
