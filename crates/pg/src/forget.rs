//! Forgetting on PostgreSQL: the rows go in one transaction, then the files let go of them.
//!
//! What goes is what the SQLite file erases (see `strata_seam::forgetting`): the messages in
//! scope, the nodes over them (a Level-0 node that also covers kept messages is rewritten from
//! what remains, by the caller's summary or a marker; a node above forgotten text is dissolved),
//! their vectors and backlog rows, the facts queued from those nodes, the memory versions that
//! came from them (a memory left with none goes; one with kept versions is rewritten from the
//! newest), import records, and for a persona its every memory and proposal. An audit row in
//! `forgets`, open only inside the erasing transaction, is what lets the guards of schema 4 allow
//! the deletes.
//!
//! Bytes: PostgreSQL deletes by marking rows dead, and a plain `VACUUM` only marks their space
//! reusable, so after the commit every table the forget touched is rewritten with `VACUUM
//! FULL` (a new heap, TOAST table and indexes, the old files unlinked), then a `CHECKPOINT`
//! writes the pages out. `VACUUM FULL` holds an ACCESS EXCLUSIVE lock on one table at a time
//! while it copies the live rows: appends and reads of that table wait for it. What stays until
//! the server recycles it (WAL segments, replicas, base backups) is in ARCHITECTURE.md.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use strata_seam::backend::{to_unix, validate_persona};
use strata_seam::forgetting::{
    Cut, ForgetCounts, ForgetPlan, ForgetScope, Forgotten, KeptSpan, Rebuilt, SessionPart, SessionVersion,
};
use strata_seam::maintenance::{proposed_label, withdrawn};
use strata_seam::memories::Provenance;
use strata_seam::{Error, Missing, NewSummary, NodeId, Result, SessionId};

use crate::PgStore;
use crate::db::{Queries, Tx, pg};

/// The tables a forget can shrink: rewritten after it so their files hold only live rows.
const REWRITTEN: &[&str] = &[
    "messages",
    "summary_nodes",
    "agent_memories",
    "memory_versions",
    "memory_updates",
    "embeddings",
    "embedding_backlog",
    "ingests",
    "sessions",
];

fn ids(tx: &mut Tx<'_>, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> Result<Vec<i64>> {
    Ok(tx.query(sql, params).map_err(pg)?.iter().map(|row| row.get(0)).collect())
}

fn count(tx: &mut Tx<'_>, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> Result<u64> {
    Ok(tx.query_one(sql, params).map_err(pg)?.get::<_, i64>(0) as u64)
}

fn cuts(tx: &mut Tx<'_>, scope: &ForgetScope) -> Result<Vec<Cut>> {
    let session_by_key = |tx: &mut Tx<'_>, key: &str| -> Result<(SessionId, String)> {
        tx.query_opt("SELECT id, persona FROM sessions WHERE key = $1", &[&key])
            .map_err(pg)?
            .map(|row| (SessionId(row.get(0)), row.get(1)))
            .ok_or_else(|| Error::NotFound(Missing::SessionKey(key.to_owned())))
    };
    match scope {
        ForgetScope::Persona { persona } => {
            validate_persona(persona)?;
            let sessions = ids(tx, "SELECT id FROM sessions WHERE persona = $1 ORDER BY id", &[persona])?;
            let memories: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM agent_memories WHERE persona = $1)
                         OR EXISTS (SELECT 1 FROM memory_updates WHERE persona = $1)",
                    &[persona],
                )
                .map_err(pg)?
                .get(0);
            if sessions.is_empty() && !memories {
                return Err(Error::Invalid {
                    field: "persona",
                    reason: format!("{persona:?} holds nothing to forget"),
                });
            }
            Ok(sessions
                .into_iter()
                .map(|id| Cut {
                    session: SessionId(id),
                    persona: persona.clone(),
                    cut: i64::MAX,
                    whole: true,
                })
                .collect())
        }
        ForgetScope::Session { key } => {
            let (session, persona) = session_by_key(tx, key)?;
            Ok(vec![Cut { session, persona, cut: i64::MAX, whole: true }])
        }
        ForgetScope::SessionBefore { key, before } => {
            let (session, persona) = session_by_key(tx, key)?;
            // The first message sent at or after `before`; when there is none, every message goes.
            let cut: i64 = tx
                .query_one(
                    "SELECT COALESCE(
                         (SELECT MIN(seq) FROM messages WHERE session_id = $1 AND created_at >= $2),
                         (SELECT next_seq FROM sessions WHERE id = $1))",
                    &[&session.0, &to_unix(*before)],
                )
                .map_err(pg)?
                .get(0);
            Ok(vec![Cut { session, persona, cut, whole: false }])
        }
    }
}

/// What `cut` takes from its session, by the rule every backend shares
/// ([`SessionPart::decide`]), from the rows read here.
fn part(tx: &mut Tx<'_>, cut: &Cut, whole_persona: bool) -> Result<SessionPart> {
    let nodes: Vec<(i64, i64, i64)> = tx
        .query(
            "SELECT id, level, last_seq FROM summary_nodes WHERE session_id = $1 AND first_seq < $2",
            &[&cut.session.0, &cut.cut],
        )
        .map_err(pg)?
        .iter()
        .map(|row| (row.get(0), i64::from(row.get::<_, i32>(1)), row.get(2)))
        .collect();
    let messages = ids(
        tx,
        "SELECT id FROM messages WHERE session_id = $1 AND seq < $2 ORDER BY seq",
        &[&cut.session.0, &cut.cut],
    )?;
    // The versions whose source is this session: a tool call in it, or a node of it.
    let versions: Vec<SessionVersion> = tx
        .query(
            "SELECT id, memory_id, (provenance->>'node')::BIGINT, (provenance->>'message')::BIGINT
             FROM memory_versions
             WHERE (provenance->>'session')::BIGINT = $1 AND provenance->>'source' IN ('agent', 'summary', 'proposal')",
            &[&cut.session.0],
        )
        .map_err(pg)?
        .iter()
        .map(|row| SessionVersion { version: row.get(0), memory: row.get(1), node: row.get(2), message: row.get(3) })
        .collect();
    SessionPart::decide(cut, whole_persona, nodes, messages, &versions, &mut |memory| {
        ids(tx, "SELECT id FROM memory_versions WHERE memory_id = $1", &[&memory])
    })
}

/// Versions of these memories beside their current one: deleted with them.
fn earlier_versions(tx: &mut Tx<'_>, memories: &[i64]) -> Result<u64> {
    count(
        tx,
        "SELECT count(*) - count(DISTINCT memory_id) FROM memory_versions WHERE memory_id = ANY($1)",
        &[&memories],
    )
}

fn vectors_of(tx: &mut Tx<'_>, kind: &str, ids: &[i64]) -> Result<u64> {
    count(tx, "SELECT count(*) FROM embeddings WHERE kind = $1 AND item_id = ANY($2)", &[&kind, &ids])
}

/// The plan: read again inside the forget's transaction, so what it erases is what it counted.
fn plan(tx: &mut Tx<'_>, scope: &ForgetScope) -> Result<(ForgetPlan, Vec<(Cut, SessionPart)>)> {
    let mut counts = ForgetCounts::default();
    let mut rebuild = Vec::new();
    let mut parts = Vec::new();
    let whole_persona = matches!(scope, ForgetScope::Persona { .. });
    for cut in cuts(tx, scope)? {
        let part = part(tx, &cut, whole_persona)?;
        counts.sessions += u64::from(cut.whole);
        counts.messages += part.messages.len() as u64;
        counts.summaries += part.doomed_nodes.len() as u64;
        counts.vectors += vectors_of(tx, "message", &part.messages)?;
        let mut nodes = part.doomed_nodes.clone();
        nodes.extend(part.partial.iter().map(|span| span.node.0));
        counts.vectors += vectors_of(tx, "summary", &nodes)?;
        counts.proposals +=
            count(tx, "SELECT count(*) FROM memory_updates WHERE node_id = ANY($1)", &[&nodes])?;
        counts.memories += part.memories.len() as u64;
        counts.memory_versions += part.versions.len() as u64 + earlier_versions(tx, &part.memories)?;
        counts.vectors += vectors_of(tx, "memory", &part.memories)?;
        counts.ingests += count(
            tx,
            "SELECT count(*) FROM ingests WHERE session_id = $1 AND first_seq < $2",
            &[&cut.session.0, &cut.cut],
        )?;
        if let Some(span) = &part.partial {
            counts.rebuilt += 1;
            rebuild.push(span.clone());
        }
        parts.push((cut, part));
    }
    if let ForgetScope::Persona { persona } = scope {
        let counted: HashSet<i64> =
            parts.iter().flat_map(|(_, part)| part.memories.iter().copied()).collect();
        let memories: Vec<i64> = ids(tx, "SELECT id FROM agent_memories WHERE persona = $1", &[persona])?
            .into_iter()
            .filter(|id| !counted.contains(id))
            .collect();
        counts.memories += memories.len() as u64;
        counts.memory_versions += earlier_versions(tx, &memories)?;
        counts.vectors += vectors_of(tx, "memory", &memories)?;
        counts.proposals += count(
            tx,
            "SELECT count(*) FROM memory_updates WHERE persona = $1 AND node_id IS NULL",
            &[persona],
        )?;
    }
    Ok((ForgetPlan { scope: scope.clone(), counts, rebuild }, parts))
}

fn delete_rows(tx: &mut Tx<'_>, kind: &str, ids: &[i64]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    tx.execute("DELETE FROM embeddings WHERE kind = $1 AND item_id = ANY($2)", &[&kind, &ids]).map_err(pg)?;
    tx.execute("DELETE FROM embedding_backlog WHERE kind = $1 AND item_id = ANY($2)", &[&kind, &ids])
        .map_err(pg)?;
    Ok(())
}

/// Deletes memories with their versions (by cascade), vectors and backlog rows.
fn delete_memories(tx: &mut Tx<'_>, memories: &[i64]) -> Result<()> {
    delete_rows(tx, "memory", memories)?;
    tx.execute("DELETE FROM agent_memories WHERE id = ANY($1)", &[&memories]).map_err(pg)?;
    Ok(())
}

/// Rewrites a memory from its versions that stay: its text becomes the newest kept version's,
/// and a key or title only erased text gave it is replaced by the one its kept writer proposed
/// (as the SQLite file does), so none of the erased text stays in a kept row.
fn rewrite_memory(tx: &mut Tx<'_>, memory: i64, gone: &HashSet<i64>) -> Result<()> {
    struct Version {
        id: i64,
        title: String,
        content: String,
        written_at: f64,
        via: Option<String>,
    }
    let versions: Vec<Version> = tx
        .query(
            "SELECT id, title, content, written_at, provenance FROM memory_versions WHERE memory_id = $1 ORDER BY id",
            &[&memory],
        )
        .map_err(pg)?
        .iter()
        .map(|row| Version {
            id: row.get(0),
            title: row.get(1),
            content: row.get(2),
            written_at: row.get(3),
            via: serde_json::from_value::<Provenance>(row.get(4)).ok().and_then(|p| p.via),
        })
        .collect();
    let (erased, kept): (Vec<Version>, Vec<Version>) =
        versions.into_iter().partition(|v| gone.contains(&v.id));
    let Some(newest) = kept.last() else {
        return delete_memories(tx, &[memory]);
    };
    let erased_titles: HashSet<&str> = erased.iter().map(|v| v.title.as_str()).collect();
    let own = |v: &&Version| proposed_label(v.via.as_deref()).is_none();
    let own_titles: HashSet<&str> = kept.iter().filter(own).map(|v| v.title.as_str()).collect();
    let row = tx
        .query_one("SELECT category, key, persona, provenance FROM agent_memories WHERE id = $1", &[&memory])
        .map_err(pg)?;
    let (category, key, persona): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    let key = match kept.iter().find(|v| !own(v)) {
        Some(first) if !kept.iter().any(|v| own(&v)) => {
            let (proposed, _) = proposed_label(first.via.as_deref()).expect("a merged version");
            let taken: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM agent_memories
                                    WHERE category = $1 AND key = $2 AND persona = $3 AND id <> $4)",
                    &[&category, &proposed, &persona, &memory],
                )
                .map_err(pg)?
                .get(0);
            if taken { format!("{proposed}_{memory}") } else { proposed.to_owned() }
        }
        _ => key,
    };
    let mut title = newest.title.clone();
    for version in &kept {
        let Some((_, proposed)) = proposed_label(version.via.as_deref()) else { continue };
        if erased_titles.contains(version.title.as_str()) && !own_titles.contains(version.title.as_str()) {
            tx.execute("UPDATE memory_versions SET title = $2 WHERE id = $1", &[&version.id, &proposed])
                .map_err(pg)?;
            if version.id == newest.id {
                title = proposed.to_owned();
            }
        }
    }
    // The newest kept version is the current one again: still true, unless it ended before
    // anything replaced it.
    if erased.iter().any(|v| v.id > newest.id) {
        tx.execute("UPDATE memory_versions SET valid_to = NULL WHERE id = $1", &[&newest.id]).map_err(pg)?;
    }
    let erased: Vec<i64> = erased.iter().map(|v| v.id).collect();
    tx.execute("DELETE FROM memory_versions WHERE id = ANY($1)", &[&erased]).map_err(pg)?;
    let provenance: serde_json::Value = tx
        .query_one("SELECT provenance FROM memory_versions WHERE id = $1", &[&newest.id])
        .map_err(pg)?
        .get(0);
    let folded = strata_seam::backend::fold(&format!("{key} {title}: {}", newest.content));
    tx.execute(
        "UPDATE agent_memories SET key = $2, title = $3, content = $4, updated_at = $5, folded = $6, provenance = $7,
             valid_from = (SELECT valid_from FROM memory_versions WHERE id = $8),
             valid_to = (SELECT valid_to FROM memory_versions WHERE id = $8)
         WHERE id = $1",
        &[&memory, &key, &title, &newest.content, &newest.written_at, &folded, &provenance, &newest.id],
    )
    .map_err(pg)?;
    // Its vectors embedded the erased text: it is embedded again from what it keeps (the
    // update's trigger queued it).
    tx.execute("DELETE FROM embeddings WHERE kind = 'memory' AND item_id = $1", &[&memory]).map_err(pg)?;
    Ok(())
}

/// Rewrites a Level-0 node over the messages it keeps, after the older ones went.
fn rewrite_leaf(tx: &mut Tx<'_>, span: &KeptSpan, summary: &NewSummary) -> Result<()> {
    if summary.headline.trim().is_empty() || summary.body.trim().is_empty() || summary.summarizer.is_empty() {
        return Err(Error::Invalid {
            field: "summary",
            reason: "a rebuilt summary needs a headline, a body and a summarizer".to_owned(),
        });
    }
    let folded = strata_seam::backend::fold(&format!("{}\n{}", summary.headline, summary.body));
    tx.execute(
        "UPDATE summary_nodes SET headline = $2, body = $3, token_count = $4, summarizer = $5,
                first_seq = $6, parent_id = NULL, folded = $7,
                start_time = (SELECT MIN(created_at) FROM messages WHERE summary_id = $1),
                end_time = (SELECT MAX(created_at) FROM messages WHERE summary_id = $1),
                source_token_count = (SELECT COALESCE(SUM(token_count), 0) FROM messages WHERE summary_id = $1)
         WHERE id = $1",
        &[
            &span.node.0,
            &summary.headline,
            &summary.body,
            &(summary.token_count.min(i32::MAX as u32) as i32),
            &summary.summarizer,
            &span.first_seq,
            &folded,
        ],
    )
    .map_err(pg)?;
    crate::forest::queue(tx, span.node, &span.persona, summary)
}

/// Erases one session's part; returns whether its partial node got a marker.
fn erase_session(
    tx: &mut Tx<'_>,
    cut: &Cut,
    part: &SessionPart,
    rebuilt: &HashMap<NodeId, &Rebuilt>,
    now: DateTime<Utc>,
) -> Result<bool> {
    let (session, seq) = (cut.session.0, cut.cut);
    let mut nodes = part.doomed_nodes.clone();
    nodes.extend(part.partial.iter().map(|span| span.node.0));
    tx.execute("DELETE FROM memory_updates WHERE node_id = ANY($1)", &[&nodes]).map_err(pg)?;
    delete_rows(tx, "message", &part.messages)?;
    delete_rows(tx, "summary", &part.doomed_nodes)?;
    tx.execute("DELETE FROM embeddings WHERE kind = 'summary' AND item_id = ANY($1)", &[&nodes])
        .map_err(pg)?;
    // Dissolve the nodes above forgotten text: their children become roots.
    tx.execute(
        "UPDATE summary_nodes SET parent_id = NULL WHERE session_id = $1 AND parent_id = ANY($2)",
        &[&session, &part.doomed_nodes],
    )
    .map_err(pg)?;
    tx.execute("DELETE FROM messages WHERE session_id = $1 AND seq < $2", &[&session, &seq]).map_err(pg)?;
    let partial = part.partial.as_ref().map(|span| span.node.0);
    tx.execute(
        "DELETE FROM summary_nodes WHERE session_id = $1 AND first_seq < $2 AND id IS DISTINCT FROM $3",
        &[&session, &seq, &partial],
    )
    .map_err(pg)?;
    delete_memories(tx, &part.memories)?;
    let gone: HashSet<i64> = part.versions.iter().copied().collect();
    for &memory in &part.rewrites {
        rewrite_memory(tx, memory, &gone)?;
    }
    let mut marked = false;
    if let Some(span) = &part.partial {
        let summary = match rebuilt.get(&span.node).filter(|done| done.span == *span) {
            Some(done) => done.summary.clone(),
            None => {
                marked = true;
                withdrawn(span, part.messages.len(), now)
            }
        };
        rewrite_leaf(tx, span, &summary)?;
    }
    if cut.whole {
        tx.execute("DELETE FROM ingests WHERE session_id = $1", &[&session]).map_err(pg)?;
        tx.execute("DELETE FROM embedding_backlog WHERE session_id = $1", &[&session]).map_err(pg)?;
        tx.execute("DELETE FROM sessions WHERE id = $1", &[&session]).map_err(pg)?;
    } else {
        tx.execute("DELETE FROM ingests WHERE session_id = $1 AND first_seq < $2", &[&session, &seq])
            .map_err(pg)?;
    }
    Ok(marked)
}

fn erase(tx: &mut Tx<'_>, scope: &ForgetScope, command: &str, rebuilt: &[Rebuilt]) -> Result<Forgotten> {
    let now = Utc::now();
    let (plan, parts) = plan(tx, scope)?;
    let (persona, key, before) = match scope {
        ForgetScope::Persona { persona } => (Some(persona.clone()), None, None),
        ForgetScope::Session { key } => (parts.first().map(|(cut, _)| cut.persona.clone()), Some(key), None),
        ForgetScope::SessionBefore { key, before } => {
            (parts.first().map(|(cut, _)| cut.persona.clone()), Some(key), Some(to_unix(*before)))
        }
    };
    // The audit row opens the guards (schema 4) for this transaction only.
    let audit: i64 = tx
        .query_one(
            "INSERT INTO forgets(command, scope, persona, session_key, before, started_at, open_in)
             VALUES ($1, $2, $3, $4, $5, $6, txid_current()) RETURNING id",
            &[&command, &scope.name(), &persona, &key, &before, &to_unix(now)],
        )
        .map_err(pg)?
        .get(0);
    let rebuilt: HashMap<NodeId, &Rebuilt> = rebuilt.iter().map(|done| (done.span.node, done)).collect();
    let mut markers = 0u64;
    for (cut, part) in &parts {
        markers += u64::from(erase_session(tx, cut, part, &rebuilt, now)?);
    }
    if let ForgetScope::Persona { persona } = scope {
        let memories = ids(tx, "SELECT id FROM agent_memories WHERE persona = $1", &[persona])?;
        delete_memories(tx, &memories)?;
        tx.execute("DELETE FROM memory_updates WHERE persona = $1", &[persona]).map_err(pg)?;
        tx.execute("DELETE FROM embedding_backlog WHERE persona = $1", &[persona]).map_err(pg)?;
    }
    let counts = plan.counts;
    let n = |value: u64| value as i64;
    tx.execute(
        "UPDATE forgets SET sessions = $2, messages = $3, summaries = $4, rebuilt = $5, memories = $6,
                memory_versions = $7, proposals = $8, vectors = $9, ingests = $10, finished_at = $11, open_in = NULL
         WHERE id = $1",
        &[
            &audit,
            &n(counts.sessions),
            &n(counts.messages),
            &n(counts.summaries),
            &n(counts.rebuilt),
            &n(counts.memories),
            &n(counts.memory_versions),
            &n(counts.proposals),
            &n(counts.vectors),
            &n(counts.ingests),
            &to_unix(Utc::now()),
        ],
    )
    .map_err(pg)?;
    Ok(Forgotten { audit, counts, markers, wal_truncated: false })
}

impl PgStore {
    /// See [`strata_seam::Maintenance::forget_plan`]: read in one read-only snapshot.
    pub(crate) fn plan_forget(&self, scope: &ForgetScope) -> Result<ForgetPlan> {
        self.snapshot(|tx| Ok(plan(tx, scope)?.0))
    }

    /// See [`strata_seam::Maintenance::forget`] and the module's doc. `Forgotten::wal_truncated`
    /// says whether the rewrite and the checkpoint both ran (the checkpoint needs a superuser or
    /// the `pg_checkpoint` role; without it the server's next checkpoint does the same).
    pub(crate) fn erase(
        &self,
        scope: &ForgetScope,
        command: &str,
        rebuilt: &[Rebuilt],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Forgotten> {
        let forgotten = self.write(|tx| erase(tx, scope, command, rebuilt))?;
        progress(forgotten.counts.messages, forgotten.counts.messages);
        let mut conn = self.connection()?;
        // `VACUUM FULL` copies every row a running transaction may still see: a snapshot taken
        // before the commit (a long read, an ANALYZE) would carry the erased rows into the new
        // files. Wait, bounded, for those to end.
        let unseen = wait_for_older_snapshots(&mut conn, SNAPSHOT_WAIT)?;
        if !unseen {
            tracing::warn!(
                "forget: transactions older than the forget still run after {SNAPSHOT_WAIT:?}; the rewrite may \
                 keep the erased rows until VACUUM FULL runs again after they end"
            );
        }
        let rewritten =
            REWRITTEN.iter().try_for_each(|table| conn.batch_execute(&format!("VACUUM FULL {table}")));
        if let Err(error) = rewritten {
            // The rows are gone (committed); only their space is not yet reclaimed.
            tracing::warn!(%error, "forget: the tables could not be rewritten; run VACUUM FULL on them");
            return Ok(forgotten);
        }
        let checkpointed = conn.batch_execute("CHECKPOINT").is_ok();
        Ok(Forgotten { wal_truncated: unseen && checkpointed, ..forgotten })
    }
}

/// How long a forget waits for the transactions that began before it to end.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits until no other session holds a snapshot from before now; false when one still does
/// after `limit`. Sessions of every database count: some work in another database (creating
/// one, for instance) holds back what every database may remove, and a forget run beside the
/// tests' `CREATE DATABASE`s kept its rows 1 time in 5 while only this database was watched. (A
/// replica's `hot_standby_feedback` can hold rows too; the server does not show it here.)
fn wait_for_older_snapshots(conn: &mut crate::db::Conn, limit: std::time::Duration) -> Result<bool> {
    let since: f64 =
        conn.query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[]).map_err(pg)?.get(0);
    let deadline = std::time::Instant::now() + limit;
    loop {
        let older: i64 = conn
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid() AND backend_xmin IS NOT NULL AND xact_start < to_timestamp($1)",
                &[&since],
            )
            .map_err(pg)?
            .get(0);
        if older == 0 {
            return Ok(true);
        }
        if std::time::Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
