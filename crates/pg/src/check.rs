//! `strata doctor` on PostgreSQL: the server keeps its own files whole, so the checks are
//! strata's: the schema (its version and the triggers that enforce the invariants) and the
//! rows (coverage, the forest's shape, dense seqs, the backlog and the vectors). Each check
//! is one query whose rows are its problems.

use strata_seam::Error;
use strata_seam::check::{Check, Report};
use strata_store::kinds::FOREST_CHECKS;

use crate::db::{Queries, SCHEMA_VERSION, Tx, pg};

/// The most problems a check lists (all are counted).
const MAX_LISTED: usize = 10;

/// The triggers that enforce what the code also checks; a dropped one is a problem.
const TRIGGERS: [(&str, &str); 6] = [
    ("messages", "messages_guard"),
    ("messages", "messages_no_truncate"),
    ("summary_nodes", "summary_nodes_guard"),
    ("messages", "messages_backlog"),
    ("summary_nodes", "summaries_backlog"),
    ("agent_memories", "memories_backlog"),
];

fn rows_check(tx: &mut Tx<'_>, name: &'static str, sql: &str) -> Result<Check, Error> {
    let rows = tx.query(sql, &[]).map_err(pg)?;
    Ok(Check {
        name,
        problems: rows.len() as u64,
        details: rows.iter().take(MAX_LISTED).map(|row| row.get(0)).collect(),
        skipped: None,
    })
}

fn schema_check(tx: &mut Tx<'_>) -> Result<Check, Error> {
    let mut check = Check { name: "the schema is strata's", problems: 0, details: Vec::new(), skipped: None };
    let version: Option<i64> =
        tx.query_one("SELECT max(version) FROM strata_schema", &[]).map_err(pg)?.get(0);
    if version != Some(SCHEMA_VERSION) {
        check.problems += 1;
        check.details.push(format!("schema version {version:?}, this build's is {SCHEMA_VERSION}"));
    }
    for (table, trigger) in TRIGGERS {
        let found: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                                WHERE c.relname = $1 AND t.tgname = $2 AND t.tgenabled <> 'D')",
                &[&table, &trigger],
            )
            .map_err(pg)?
            .get(0);
        if !found {
            check.problems += 1;
            check.details.push(format!("trigger {trigger} on {table} is missing or disabled"));
        }
    }
    Ok(check)
}

/// Runs every check, in one snapshot.
pub(crate) fn doctor(tx: &mut Tx<'_>) -> Result<Report, Error> {
    let mut checks = vec![schema_check(tx)?];
    checks.push(rows_check(
        tx,
        "each compacted message lies inside its Level-0 node",
        "SELECT 'message ' || m.id || ' (seq ' || m.seq || ') points at node ' || m.summary_id ||
                ' (level ' || n.level || ', session ' || n.session_id || ', seq ' || n.first_seq || '-' || n.last_seq || ')'
         FROM messages m JOIN summary_nodes n ON n.id = m.summary_id
         WHERE n.level <> 0 OR n.session_id <> m.session_id
            OR m.seq NOT BETWEEN n.first_seq AND n.last_seq OR m.pinned",
    )?);
    checks.push(rows_check(
        tx,
        "each Level-0 node covers every message of its range",
        "SELECT 'node ' || n.id || ' (seq ' || n.first_seq || '-' || n.last_seq || ') covers ' || covered ||
                ' of the ' || in_range || ' messages of its range'
         FROM summary_nodes n,
              LATERAL (SELECT count(*) AS covered FROM messages m WHERE m.summary_id = n.id) c,
              LATERAL (SELECT count(*) AS in_range FROM messages m
                       WHERE m.session_id = n.session_id AND m.seq BETWEEN n.first_seq AND n.last_seq) r
         WHERE n.level = 0 AND covered <> in_range",
    )?);
    for (name, sql) in FOREST_CHECKS {
        checks.push(rows_check(tx, name, sql)?);
    }
    checks.push(rows_check(
        tx,
        "seqs are dense in every session",
        // Dense from the first kept message: `forget --before` takes a session's oldest ones.
        "SELECT 'session ' || s.id || ' has ' || count(m.id) || ' messages but seqs ' || min(m.seq) || ' to '
                || max(m.seq) || ', next ' || s.next_seq
         FROM sessions s JOIN messages m ON m.session_id = s.id GROUP BY s.id
         HAVING count(m.id) <> max(m.seq) - min(m.seq) + 1 OR max(m.seq) <> s.next_seq - 1",
    )?);
    checks.push(rows_check(
        tx,
        "backlog entries and vectors name existing rows",
        "SELECT kind || ' ' || item_id || ' is ' || what || ' but does not exist'
         FROM (SELECT kind, item_id, 'queued for embedding' AS what FROM embedding_backlog
               UNION ALL
               SELECT DISTINCT kind, item_id, 'embedded' FROM embeddings) e
         WHERE (kind = 'message' AND NOT EXISTS (SELECT 1 FROM messages WHERE id = e.item_id))
            OR (kind = 'summary' AND NOT EXISTS (SELECT 1 FROM summary_nodes WHERE id = e.item_id))
            OR (kind = 'memory' AND NOT EXISTS (SELECT 1 FROM agent_memories WHERE id = e.item_id))",
    )?);
    let embedding_backlog: i64 =
        tx.query_one("SELECT count(*) FROM embedding_backlog", &[]).map_err(pg)?.get(0);
    Ok(Report { checks, embedding_backlog: embedding_backlog as u64 })
}
