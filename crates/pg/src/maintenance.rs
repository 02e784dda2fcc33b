//! The maintenance role on PostgreSQL: importing transcripts (re-runs add nothing), exporting
//! a persona or a session, and the audit of forgets (the erasure itself is `forget.rs`). The
//! rules are the seam's (`strata_seam::maintenance`); this module only reads and writes rows.

use std::collections::HashMap;

use chrono::Utc;
use strata_seam::backend::{from_unix, to_unix, validate_persona, validate_session_key};
use strata_seam::forgetting::{ForgetCounts, ForgetRecord};
use strata_seam::maintenance::{chain, matching_run, recognize_transcript};
use strata_seam::transfer::{ExportScope, ExportedMessage, Imported, IncomingMessage};
use strata_seam::{Error, NewMessage, Result, SessionId};

use crate::db::{Queries, Tx, pg};
use crate::{PgStore, append_in, rows};

impl PgStore {
    /// See [`strata_seam::Maintenance::import`].
    pub(crate) fn import_messages(&self, incoming: &[IncomingMessage]) -> Result<Imported> {
        for item in incoming {
            validate_session_key(&item.session_key)?;
            validate_persona(&item.persona)?;
            item.message.validate()?;
        }
        // Each session's messages, in order of the session's first appearance.
        let mut order: Vec<&str> = Vec::new();
        let mut by_session: HashMap<&str, Vec<&IncomingMessage>> = HashMap::new();
        for item in incoming {
            by_session
                .entry(item.session_key.as_str())
                .or_insert_with(|| {
                    order.push(&item.session_key);
                    Vec::new()
                })
                .push(item);
        }
        self.write(|tx| {
            let now = to_unix(Utc::now());
            let mut imported = Imported::default();
            for key in &order {
                let group = &by_session[key];
                let (session, persona) = session_for_import(tx, key, &group[0].persona, now)?;
                // Every line's persona is checked, not only the first.
                if let Some(other) = group.iter().find(|item| item.persona != persona) {
                    return Err(Error::PersonaMismatch {
                        key: other.session_key.clone(),
                        existing: persona,
                        requested: other.persona.clone(),
                    });
                }
                let digests: Option<Vec<[u8; 32]>> = group.iter().map(|item| item.line_digest).collect();
                let chain = digests.as_deref().map(chain).unwrap_or_default();
                let mut done = already_stored(tx, session, &chain)?;
                if done == 0 && !chain.is_empty() {
                    let messages: Vec<&NewMessage> = group.iter().map(|item| &item.message).collect();
                    done = stored_by_content(tx, session, key, &messages)?;
                }
                let messages: Vec<NewMessage> =
                    group[done..].iter().map(|item| item.message.clone()).collect();
                let appended = append_in(tx, session, &messages)?;
                if let Some(digest) = chain.last() {
                    tx.execute(
                        "INSERT INTO ingests(session_id, digest, lines, first_seq, created_at)
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                        &[&session.0, digest, &(chain.len() as i64), &appended.first_seq, &now],
                    )
                    .map_err(pg)?;
                }
                imported.skipped += done + messages.len() - appended.stored.len();
                imported.ids.extend(appended.stored);
            }
            Ok(imported)
        })
    }

    /// See [`strata_seam::Maintenance::export_messages`]: one statement in one snapshot.
    pub(crate) fn exported(&self, scope: ExportScope<'_>) -> Result<Vec<ExportedMessage>> {
        let (column, value) = match scope {
            ExportScope::Persona(persona) => ("persona", persona),
            ExportScope::Session(key) => ("key", key),
        };
        // `column` is one of two fixed names, never user text; the value is bound.
        let sql = format!(
            "SELECT {}, (SELECT key FROM sessions WHERE id = session_id),
                    (SELECT persona FROM sessions WHERE id = session_id), created_at, external_id
             FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE {column} = $1)
             ORDER BY session_id, seq",
            rows::MESSAGE
        );
        self.snapshot(|tx| {
            Ok(tx
                .query(&sql, &[&value])
                .map_err(pg)?
                .iter()
                .map(|row| ExportedMessage {
                    message: rows::message(row),
                    session_key: row.get(13),
                    persona: row.get(14),
                    created_at_seconds: row.get(15),
                    external_id: row.get(16),
                })
                .collect())
        })
    }

    /// See [`strata_seam::Maintenance::forgets`].
    pub(crate) fn forget_records(&self) -> Result<Vec<ForgetRecord>> {
        let rows = self
            .connection()?
            .query(
                "SELECT id, command, scope, persona, session_key, before, sessions, messages, summaries,
                        rebuilt, memories, memory_versions, proposals, vectors, ingests, finished_at
                 FROM forgets ORDER BY id",
                &[],
            )
            .map_err(pg)?;
        Ok(rows
            .iter()
            .map(|row| {
                let count = |index: usize| row.get::<_, i64>(index) as u64;
                ForgetRecord {
                    id: row.get(0),
                    command: row.get(1),
                    scope: row.get(2),
                    persona: row.get(3),
                    session_key: row.get(4),
                    before: row.get::<_, Option<f64>>(5).map(from_unix),
                    counts: ForgetCounts {
                        sessions: count(6),
                        messages: count(7),
                        summaries: count(8),
                        rebuilt: count(9),
                        memories: count(10),
                        memory_versions: count(11),
                        proposals: count(12),
                        vectors: count(13),
                        ingests: count(14),
                    },
                    finished_at: row.get::<_, Option<f64>>(15).map(from_unix),
                }
            })
            .collect())
    }
}

/// The session named `key`, created for `persona` if new, locked for the import; with its
/// persona (which the caller checks against every line's).
fn session_for_import(tx: &mut Tx<'_>, key: &str, persona: &str, now: f64) -> Result<(SessionId, String)> {
    tx.execute(
        "INSERT INTO sessions(key, persona, created_at, last_active_at) VALUES ($1, $2, $3, $3)
         ON CONFLICT (key) DO NOTHING",
        &[&key, &persona, &now],
    )
    .map_err(pg)?;
    let row =
        tx.query_one("SELECT id, persona FROM sessions WHERE key = $1 FOR UPDATE", &[&key]).map_err(pg)?;
    Ok((SessionId(row.get(0)), row.get(1)))
}

/// How many leading lines a recorded run of the session already stored.
fn already_stored(tx: &mut Tx<'_>, session: SessionId, chain: &[String]) -> Result<usize> {
    if chain.is_empty() {
        return Ok(0);
    }
    let runs = tx
        .query(
            "SELECT digest, lines FROM ingests WHERE session_id = $1 AND lines <= $2",
            &[&session.0, &(chain.len() as i64)],
        )
        .map_err(pg)?;
    Ok(matching_run(runs.iter().map(|row| (row.get(0), row.get(1))), chain))
}

/// An edited or shortened version of a transcript imported before, recognized by content.
fn stored_by_content(
    tx: &mut Tx<'_>,
    session: SessionId,
    key: &str,
    messages: &[&NewMessage],
) -> Result<usize> {
    let starts: Vec<i64> = tx
        .query(
            "SELECT DISTINCT first_seq FROM ingests WHERE session_id = $1 ORDER BY first_seq",
            &[&session.0],
        )
        .map_err(pg)?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut at = |seq: i64| -> Result<Option<(String, String)>> {
        Ok(tx
            .query_opt(
                "SELECT role, content FROM messages WHERE session_id = $1 AND seq = $2",
                &[&session.0, &seq],
            )
            .map_err(pg)?
            .map(|row| (row.get(0), row.get(1))))
    };
    recognize_transcript(&starts, &mut at, key, messages)
}
