//! Outlines and the live part of a session (the head and what no summary covers), and the
//! reads assembly makes from one snapshot ([`Reader`]).

use std::cell::RefCell;
use std::ops::Range;

use chrono::{DateTime, Utc};
use strata_seam::backend::{CompactionState, from_unix};
use strata_seam::{
    Category, Error, Level, Memory, Message, MessageOutline, Session, SessionId, Snapshot, SummaryNode,
};

use crate::db::{Queries, Tx, pg};
use crate::{forest, memories, rows};

/// The outline of every message of a session, in seq order.
pub(crate) fn outline(db: &mut impl Queries, session: SessionId) -> Result<Vec<MessageOutline>, Error> {
    let sql = format!("SELECT {} FROM messages WHERE session_id = $1 ORDER BY seq", rows::OUTLINE);
    Ok(db.query(&sql, &[&session.0]).map_err(pg)?.iter().map(rows::outline).collect())
}

/// The outline of the head (seq below `head`) and of every uncovered message, in seq order;
/// the summarized history is never read.
pub(crate) fn live_outline(
    db: &mut impl Queries,
    session: SessionId,
    head: i64,
) -> Result<Vec<MessageOutline>, Error> {
    let sql = live_part(rows::OUTLINE);
    Ok(db.query(&sql, &[&session.0, &head]).map_err(pg)?.iter().map(rows::outline).collect())
}

/// Every message with seq below `head_end` and every uncovered message after it, in seq order.
fn context_messages(db: &mut impl Queries, session: SessionId, head_end: i64) -> Result<Vec<Message>, Error> {
    let sql = live_part(rows::MESSAGE);
    Ok(db.query(&sql, &[&session.0, &head_end]).map_err(pg)?.iter().map(rows::message).collect())
}

/// `columns` of a session's live part: the messages with seq below `$2` and every uncovered
/// one, in seq order, as two index ranges (the second through `messages_uncovered`).
fn live_part(columns: &str) -> String {
    format!(
        "SELECT {columns} FROM messages WHERE session_id = $1 AND seq < $2
         UNION ALL
         SELECT {columns} FROM messages WHERE session_id = $1 AND summary_id IS NULL AND seq >= $2
         ORDER BY seq"
    )
}

/// The newest `limit` messages of a session that no summary covers yet, oldest first.
pub(crate) fn recent_uncovered(
    db: &mut impl Queries,
    session: SessionId,
    limit: usize,
) -> Result<Vec<Message>, Error> {
    let sql = format!(
        "SELECT {} FROM messages WHERE session_id = $1 AND summary_id IS NULL ORDER BY seq DESC LIMIT $2",
        rows::MESSAGE
    );
    let mut found: Vec<Message> =
        db.query(&sql, &[&session.0, &(limit as i64)]).map_err(pg)?.iter().map(rows::message).collect();
    found.reverse();
    Ok(found)
}

/// Assembly's reads inside one repeatable-read transaction: every read sees the database as
/// the first one did.
pub(crate) struct Reader<'a, 't> {
    tx: RefCell<&'a mut Tx<'t>>,
}

impl<'a, 't> Reader<'a, 't> {
    pub(crate) fn new(tx: &'a mut Tx<'t>) -> Reader<'a, 't> {
        Reader { tx: RefCell::new(tx) }
    }
}

impl Snapshot for Reader<'_, '_> {
    fn session(&self, id: SessionId) -> Result<Session, Error> {
        crate::session_by_id(&mut **self.tx.borrow_mut(), id, false)
    }

    fn live_outline(&self, session: SessionId, head: i64) -> Result<Vec<MessageOutline>, Error> {
        live_outline(&mut **self.tx.borrow_mut(), session, head)
    }

    fn context_messages(&self, session: SessionId, head_end: i64) -> Result<Vec<Message>, Error> {
        context_messages(&mut **self.tx.borrow_mut(), session, head_end)
    }

    fn roots(&self, session: SessionId, level: Option<Level>) -> Result<Vec<SummaryNode>, Error> {
        forest::roots(&mut **self.tx.borrow_mut(), session, level)
    }

    fn memories(&self, persona: &str, category: Option<Category>) -> Result<Vec<Memory>, Error> {
        memories::list(&mut **self.tx.borrow_mut(), persona, category)
    }

    fn message_time(&self, session: SessionId, seq: i64) -> Result<Option<DateTime<Utc>>, Error> {
        let row = self
            .tx
            .borrow_mut()
            .query_opt(
                "SELECT created_at FROM messages WHERE session_id = $1 AND seq = $2",
                &[&session.0, &seq],
            )
            .map_err(pg)?;
        Ok(row.map(|row| from_unix(row.get(0))))
    }

    fn next_seq(&self, session: SessionId) -> Result<i64, Error> {
        let row = self
            .tx
            .borrow_mut()
            .query_opt("SELECT next_seq FROM sessions WHERE id = $1", &[&session.0])
            .map_err(pg)?;
        row.map(|row| row.get(0)).ok_or(Error::NotFound(strata_seam::Missing::Session(session)))
    }

    fn compaction_state(&self, session: SessionId) -> Result<CompactionState, Error> {
        crate::upkeep::compaction_state(&mut **self.tx.borrow_mut(), session)
    }

    fn folded_before(
        &self,
        session: SessionId,
        seqs: Range<i64>,
        tokens: u64,
    ) -> Result<Vec<Message>, Error> {
        // Newest first, a page at a time, each page cut on the server where its running total
        // passes what is left of `tokens`: one round trip as a rule, and the rows read follow
        // the budget. A page is sized for messages of 128 tokens (the demo's average is about
        // 130); shorter ones take another page.
        let sql = format!(
            "SELECT {columns} FROM (
                 SELECT {columns}, sum(token_count) OVER (ORDER BY seq DESC) - token_count AS before
                 FROM (SELECT {columns} FROM messages WHERE session_id = $1 AND seq >= $2 AND seq < $3
                       ORDER BY seq DESC LIMIT $4) page
             ) counted WHERE before <= $5 ORDER BY seq DESC",
            columns = rows::MESSAGE
        );
        let (mut messages, mut spent, mut end) = (Vec::new(), 0u64, seqs.end);
        while spent <= tokens && end > seqs.start {
            let left = tokens - spent;
            let page = (left / 128 + 16).min(4096) as i64;
            let left = left.min(i64::MAX as u64) as i64;
            let rows = self
                .tx
                .borrow_mut()
                .query(&sql, &[&session.0, &seqs.start, &end, &page, &left])
                .map_err(pg)?;
            for row in &rows {
                let message = rows::message(row);
                end = message.seq;
                spent += u64::from(message.token_count);
                messages.push(message);
            }
            if (rows.len() as i64) < page {
                break;
            }
        }
        messages.reverse();
        Ok(messages)
    }

    fn has_request_before(&self, session: SessionId, seq: i64) -> Result<bool, Error> {
        let row = self
            .tx
            .borrow_mut()
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE session_id = $1 AND seq < $2 AND role = 'user')",
                &[&session.0, &seq],
            )
            .map_err(pg)?;
        Ok(row.get(0))
    }
}
