//! Re-run detection for imported transcripts.
//!
//! An import stores a file's messages in one transaction, but the user may never see it
//! confirm (a kill just after the commit) and run it again. Each session's lines of a file are
//! chained into a digest (`d_i = sha256(d_{i-1} || sha256(line_i))`); a run records the digest
//! of all its lines for that session. A later run whose first `n` lines chain to a recorded
//! digest of `n` lines skips them: the same file adds nothing, a longer version of it adds only
//! its new lines, and another file that merely starts with the same line is not mistaken for
//! it (its digest over the recorded run's length differs).

use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::types::{SessionId, to_unix};

/// The sha-256 of one transcript line, as
/// [`IncomingMessage::line_digest`](crate::transfer::IncomingMessage::line_digest) holds it.
pub fn line_digest(line: &str) -> [u8; 32] {
    Sha256::digest(line.as_bytes()).into()
}

/// The chained digests of a session's lines: element `i` covers lines `0..=i`.
pub(crate) fn chain(lines: &[[u8; 32]]) -> Vec<String> {
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
    let mut runs = conn.prepare_cached(
        "SELECT digest, lines FROM ingests WHERE session_id = ?1 AND lines <= ?2 ORDER BY lines DESC",
    )?;
    let mut rows = runs.query(params![session, chain.len() as i64])?;
    while let Some(row) = rows.next()? {
        let digest: String = row.get(0)?;
        let lines: i64 = row.get(1)?;
        if usize::try_from(lines).ok().and_then(|n| chain.get(n - 1)) == Some(&digest) {
            return Ok(lines as usize);
        }
    }
    Ok(0)
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
