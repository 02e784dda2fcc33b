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
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::types::{SessionId, to_unix};

/// The sha-256 of one transcript line, as
/// [`IncomingMessage::line_digest`](crate::transfer::IncomingMessage::line_digest) holds it.
pub fn line_digest(line: &str) -> [u8; 32] {
    Sha256::digest(line.as_bytes()).into()
}

/// The chained digests of a session's lines: element `i` covers lines `0..=i`.
pub fn chain(lines: &[[u8; 32]]) -> Vec<String> {
    let mut digest = [0u8; 32];
    lines
        .iter()
        .map(|line| {
            let mut hasher = Sha256::new();
            hasher.update(digest);
            hasher.update(line);
            digest = hasher.finalize().into();
            digest.iter().map(|b| format!("{b:02x}")).collect()
        })
        .collect()
}

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

/// Of a session's recorded runs (digest, lines), the length of the longest whose digest is
/// the chain's at that length; 0 when none is. Shared by every backend.
pub fn matching_run(runs: impl IntoIterator<Item = (String, i64)>, chain: &[String]) -> usize {
    runs.into_iter()
        .filter(|(digest, lines)| {
            usize::try_from(*lines).ok().and_then(|n| n.checked_sub(1)).and_then(|n| chain.get(n))
                == Some(digest)
        })
        .map(|(_, lines)| lines as usize)
        .max()
        .unwrap_or(0)
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
    messages: &[&crate::NewMessage],
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

/// Which leading lines of a transcript a session already holds, over any backend: `starts`
/// are the first seqs of the session's recorded runs, `at` reads the stored (role, content)
/// at a seq. Shared by every backend, so an edited transcript is recognized and refused alike
/// on each.
pub fn recognize_transcript(
    starts: &[i64],
    at: &mut dyn FnMut(i64) -> Result<Option<(String, String)>>,
    key: &str,
    messages: &[&crate::NewMessage],
) -> Result<usize> {
    let Some(first) = messages.first() else { return Ok(0) };
    let same = |message: &crate::NewMessage, (role, content): &(String, String)| {
        message.role.as_str() == role && &message.content == content
    };
    // The edited start whose matching prefix is longest: (matched, seq that differs).
    let mut edited: Option<(usize, i64)> = None;
    for &start in starts {
        if !at(start)?.is_some_and(|row| same(first, &row)) {
            continue;
        }
        // Every position both hold is compared: the leading run that matches, the first that
        // differs, and how many match in all.
        let (mut matched, mut differs, mut alike, mut compared) = (0, None, 0usize, 0usize);
        for (offset, message) in messages.iter().enumerate() {
            let Some(row) = at(start + offset as i64)? else { break };
            compared += 1;
            if same(message, &row) {
                alike += 1;
                if differs.is_none() {
                    matched += 1;
                }
            } else if differs.is_none() {
                differs = Some(start + offset as i64);
            }
        }
        match differs {
            None => return Ok(matched),
            // Most of it is the stored conversation: the same transcript, edited. Another file
            // that merely opens with the same line ("ok") differs at most places: not this one.
            Some(seq) if alike >= 2 && alike * 2 > compared => {
                if edited.is_none_or(|(longest, _)| matched > longest) {
                    edited = Some((matched, seq));
                }
            }
            Some(_) => {}
        }
    }
    match edited {
        Some((matched, seq)) => {
            Err(Error::EditedTranscript { session: key.to_owned(), position: matched + 1, seq })
        }
        None => Ok(0),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_depends_on_every_earlier_line() {
        let a = [line_digest("a"), line_digest("b"), line_digest("c")];
        let b = [line_digest("x"), line_digest("b"), line_digest("c")];
        let (a, b) = (chain(&a), chain(&b));
        assert_eq!(a.len(), 3);
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
        assert_eq!(chain(&[line_digest("a"), line_digest("b")]), a[..2]);
    }
}
