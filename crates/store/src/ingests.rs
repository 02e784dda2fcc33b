//! Re-run detection for imported transcripts.
//!
//! An import stores a file's messages in one transaction, but the user may never see it
//! confirm (a kill just after the commit) and run it again. Each session's lines of a file are
//! chained into a digest (`d_i = sha256(d_{i-1} || sha256(line_i))`); a run records the digest
//! of all its lines for that session. A later run whose first `n` lines chain to a recorded
//! digest of `n` lines skips them: the same file adds nothing, a longer version of it adds only
//! its new lines, and another file that merely starts with the same line is not mistaken for
//! it (its digest over the recorded run's length differs). When no digest matches, an edited or
//! shortened version of a stored transcript is recognized by content and position
//! ([`stored_by_content`]): a shortened one adds nothing, an edited one is refused naming the
//! first message that differs.

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::types::{SessionId, to_unix};
pub(crate) use strata_seam::maintenance::{matching_run, recognize_transcript};

/// How many of the leading lines a recorded run of this session already stored: the longest
/// recorded run whose digest matches the chain at its length.
pub(crate) fn already_stored(conn: &Connection, session: SessionId, chain: &[String]) -> Result<usize> {
    let runs = crate::db::query_all(
        conn,
        "SELECT digest, lines FROM ingests WHERE session_id = ?1 AND lines <= ?2",
        params![session, chain.len() as i64],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    Ok(matching_run(runs, chain))
}

/// When no recorded run matches the chain (a line was edited, or the file was cut short), how
/// many leading `messages` are the ones an earlier import of the same transcript stored, found
/// by content and position: from each recorded run's first message, the input's messages are
/// compared in order with the stored ones. A start whose every message matches (the input ends,
/// or goes on past what is stored) skips those; one that matches the first message, then
/// differs, but matches at most places (at least two) is an edited transcript, refused with the
/// first message that differs, since storing the whole input again would duplicate the
/// conversation. Anything else is another transcript: 0, all of it is new. An edited first
/// line is not recognized (the input starts no recorded run).
pub(crate) fn stored_by_content(
    conn: &Connection,
    session: SessionId,
    key: &str,
    messages: &[&crate::types::NewMessage],
) -> Result<usize> {
    let starts: Vec<i64> = crate::db::query_all(
        conn,
        "SELECT DISTINCT first_seq FROM ingests WHERE session_id = ?1 ORDER BY first_seq",
        [session],
        |row| row.get(0),
    )?;
    let mut stored =
        conn.prepare_cached("SELECT role, content FROM messages WHERE session_id = ?1 AND seq = ?2")?;
    let mut at = |seq: i64| -> Result<Option<(String, String)>> {
        Ok(rusqlite::OptionalExtension::optional(
            stored.query_row(params![session, seq], |row| Ok((row.get(0)?, row.get(1)?))),
        )?)
    };
    recognize_transcript(&starts, &mut at, key, messages)
}

/// Records a run of `chain.len()` lines of a session whose first new message got `first_seq`.
pub(crate) fn record(
    conn: &Connection,
    session: SessionId,
    chain: &[String],
    first_seq: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    let Some(digest) = chain.last() else { return Ok(()) };
    conn.prepare_cached(
        "INSERT OR IGNORE INTO ingests(session_id, digest, lines, first_seq, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![session, digest, chain.len() as i64, first_seq, to_unix(now)])?;
    Ok(())
}
