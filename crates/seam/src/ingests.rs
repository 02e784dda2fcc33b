//! Bringing transcripts in: the messages an import carries ([`IncomingMessage`]), what it
//! stored ([`Imported`]), and how a re-run import recognizes the lines a database holds already
//! (the line digests and their chain).

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::types::{MessageId, NewMessage};

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

/// A message to append to a session named by key, as read from a transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct IncomingMessage {
    /// The session's key; created on first use.
    pub session_key: String,
    /// The persona a new session is bound to (must match an existing one).
    pub persona: String,
    /// The message.
    pub message: NewMessage,
    /// The sha-256 of the transcript line it was read from
    /// ([`line_digest`](crate::transfer::line_digest)). When every message of a session in a
    /// call has one, re-running the same transcript skips what an earlier run stored (see
    /// [`Maintenance::import`](crate::Maintenance::import)).
    pub line_digest: Option<[u8; 32]>,
}

/// What [`Maintenance::import`](crate::Maintenance::import) did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// The messages stored by this call, in order.
    pub ids: Vec<MessageId>,
    /// Messages not stored again: lines an earlier run of the same transcript stored, and
    /// messages whose `external_id` their session already held.
    pub skipped: usize,
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
