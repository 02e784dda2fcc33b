//! The summary forest on PostgreSQL: the same checks as SQLite's `forest.rs`, with the session's
//! row lock in place of SQLite's one writer, so two compactors of one session take turns and
//! the second finds the first's coverage.

use chrono::Utc;
use strata_seam::backend::{NodePlace, RAW_ARCHIVE, check_adjacent, plan_merge, to_unix, validate_summary};
use strata_seam::{Error, Level, Missing, NewSummary, NodeId, SessionId, SummaryNode};

use crate::db::{Queries, Tx, pg};
use crate::rows;

pub(crate) fn by_id(db: &mut impl Queries, id: NodeId) -> Result<SummaryNode, Error> {
    let sql = format!("SELECT {} FROM summary_nodes WHERE id = $1", rows::NODE);
    db.query_opt(&sql, &[&id.0])
        .map_err(pg)?
        .map(|row| rows::node(&row))
        .ok_or(Error::NotFound(Missing::Node(id)))
}

/// Locks the session's row for the rest of the transaction; returns its persona.
fn lock_session(tx: &mut Tx<'_>, session: SessionId) -> Result<String, Error> {
    tx.query_opt("SELECT persona FROM sessions WHERE id = $1 FOR UPDATE", &[&session.0])
        .map_err(pg)?
        .map(|row| row.get(0))
        .ok_or(Error::NotFound(Missing::Session(session)))
}

pub(crate) fn insert_leaf(
    tx: &mut Tx<'_>,
    session: SessionId,
    first_seq: i64,
    last_seq: i64,
    summary: &NewSummary,
) -> Result<SummaryNode, Error> {
    validate_summary(summary)?;
    if first_seq < 0 || last_seq < first_seq {
        return Err(Error::Invalid {
            field: "range",
            reason: format!("{first_seq}..={last_seq} is not a range of seqs"),
        });
    }
    let persona = lock_session(tx, session)?;
    let row = tx
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE pinned), min(created_at), max(created_at),
                    COALESCE(sum(token_count), 0)::BIGINT
             FROM messages WHERE session_id = $1 AND seq BETWEEN $2 AND $3",
            &[&session.0, &first_seq, &last_seq],
        )
        .map_err(pg)?;
    let (count, pinned): (i64, i64) = (row.get(0), row.get(1));
    let (start, end): (Option<f64>, Option<f64>) = (row.get(2), row.get(3));
    let tokens: i64 = row.get(4);
    if count != last_seq - first_seq + 1 {
        return Err(Error::Invalid {
            field: "range",
            reason: format!("session {session} has no messages for every seq in {first_seq}..={last_seq}"),
        });
    }
    if pinned > 0 {
        return Err(Error::Invalid {
            field: "range",
            reason: format!("{first_seq}..={last_seq} holds a pinned message"),
        });
    }
    let covered = tx
        .query_opt(
            "SELECT seq, summary_id FROM messages
             WHERE session_id = $1 AND seq BETWEEN $2 AND $3 AND summary_id IS NOT NULL ORDER BY seq LIMIT 1",
            &[&session.0, &first_seq, &last_seq],
        )
        .map_err(pg)?;
    if let Some(row) = covered {
        return Err(Error::AlreadyCovered { session, seq: row.get(0), node: NodeId(row.get(1)) });
    }
    let place = NodePlace {
        session,
        level: Level::LEAF,
        first_seq,
        last_seq,
        start_time: start.unwrap_or_default(),
        end_time: end.unwrap_or_default(),
        source_token_count: tokens,
    };
    let id = insert(tx, &persona, &place, summary)?;
    tx.execute(
        "UPDATE messages SET summary_id = $1 WHERE session_id = $2 AND seq BETWEEN $3 AND $4",
        &[&id.0, &session.0, &first_seq, &last_seq],
    )
    .map_err(pg)?;
    by_id(tx, id)
}

pub(crate) fn merge(
    tx: &mut Tx<'_>,
    children: &[NodeId],
    summary: &NewSummary,
) -> Result<SummaryNode, Error> {
    validate_summary(summary)?;
    let Some(&first) = children.first() else {
        return Err(Error::Invalid { field: "children", reason: "a merge needs at least two nodes".into() });
    };
    let first = by_id(tx, first)?;
    let persona = lock_session(tx, first.session_id)?;
    // Read again under the lock: another merge may have linked them meanwhile.
    let nodes = children.iter().map(|&id| by_id(tx, id)).collect::<Result<Vec<_>, Error>>()?;
    let (nodes, parent) = plan_merge(nodes)?;
    let (first, last) = (&nodes[0], &nodes[nodes.len() - 1]);
    let between: i64 = tx
        .query_one(
            "SELECT count(*) FROM summary_nodes
             WHERE session_id = $1 AND level = $2 AND parent_id IS NULL AND first_seq BETWEEN $3 AND $4",
            &[&parent.session.0, &(first.level.0 as i32), &first.first_seq, &last.first_seq],
        )
        .map_err(pg)?
        .get(0);
    check_adjacent(between, &nodes)?;
    let id = insert(tx, &persona, &parent, summary)?;
    let ids: Vec<i64> = nodes.iter().map(|node| node.id.0).collect();
    tx.execute("UPDATE summary_nodes SET parent_id = $1 WHERE id = ANY($2)", &[&id.0, &ids]).map_err(pg)?;
    by_id(tx, id)
}

pub(crate) fn replace_summary(
    tx: &mut Tx<'_>,
    id: NodeId,
    expected_summarizer: &str,
    summary: &NewSummary,
) -> Result<SummaryNode, Error> {
    validate_summary(summary)?;
    let folded = strata_seam::backend::fold(&format!("{}\n{}", summary.headline, summary.body));
    let changed = tx
        .execute(
            "UPDATE summary_nodes SET headline = $3, body = $4, token_count = $5, summarizer = $6, folded = $7
             WHERE id = $1 AND summarizer = $2",
            &[
                &id.0,
                &expected_summarizer,
                &summary.headline,
                &summary.body,
                &(summary.token_count as i32),
                &summary.summarizer,
                &folded,
            ],
        )
        .map_err(pg)?;
    if changed == 0 {
        let node = by_id(tx, id)?;
        return Err(Error::AlreadyReplaced { node: id, summarizer: node.summarizer });
    }
    let persona: String =
        tx.query_one("SELECT persona FROM summary_nodes WHERE id = $1", &[&id.0]).map_err(pg)?.get(0);
    queue(tx, id, &persona, summary)?;
    by_id(tx, id)
}

fn insert(tx: &mut Tx<'_>, persona: &str, place: &NodePlace, summary: &NewSummary) -> Result<NodeId, Error> {
    let folded = strata_seam::backend::fold(&format!("{}\n{}", summary.headline, summary.body));
    let row = tx
        .query_one(
            "INSERT INTO summary_nodes(session_id, persona, level, headline, body, first_seq, last_seq, start_time,
                                       end_time, token_count, source_token_count, summarizer, created_at, folded)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING id",
            &[
                &place.session.0,
                &persona,
                &(place.level.0 as i32),
                &summary.headline,
                &summary.body,
                &place.first_seq,
                &place.last_seq,
                &place.start_time,
                &place.end_time,
                &(summary.token_count as i32),
                &(place.source_token_count.min(i64::from(i32::MAX)) as i32),
                &summary.summarizer,
                &to_unix(Utc::now()),
                &folded,
            ],
        )
        .map_err(pg)?;
    let id = NodeId(row.get(0));
    queue(tx, id, persona, summary)?;
    Ok(id)
}

/// Queues the facts a summary carries for consolidation into memories, in its transaction.
pub(crate) fn queue(tx: &mut Tx<'_>, node: NodeId, persona: &str, summary: &NewSummary) -> Result<(), Error> {
    let now = to_unix(Utc::now());
    for update in &summary.memory_updates {
        tx.execute(
            "INSERT INTO memory_updates(persona, node_id, category, key, title, content, created_at, edit)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &persona,
                &node.0,
                &update.category.as_str(),
                &update.key,
                &update.title,
                &update.content,
                &now,
                &update.edit.map(|edit| edit.as_str()),
            ],
        )
        .map_err(pg)?;
    }
    Ok(())
}

/// The roots of a session's forest in time order, only of `level` when given.
pub(crate) fn roots(
    db: &mut impl Queries,
    session: SessionId,
    level: Option<Level>,
) -> Result<Vec<SummaryNode>, Error> {
    let level = level.map(|level| level.0 as i32);
    let sql = format!(
        "SELECT {} FROM summary_nodes WHERE session_id = $1 AND parent_id IS NULL
         AND ($2::INTEGER IS NULL OR level = $2) ORDER BY first_seq",
        rows::NODE
    );
    Ok(db.query(&sql, &[&session.0, &level]).map_err(pg)?.iter().map(rows::node).collect())
}

/// Every node of a session, by level then position.
pub(crate) fn all(db: &mut impl Queries, session: SessionId) -> Result<Vec<SummaryNode>, Error> {
    let sql =
        format!("SELECT {} FROM summary_nodes WHERE session_id = $1 ORDER BY level, first_seq", rows::NODE);
    Ok(db.query(&sql, &[&session.0]).map_err(pg)?.iter().map(rows::node).collect())
}

/// The children of a node in time order.
pub(crate) fn children(db: &mut impl Queries, id: NodeId) -> Result<Vec<SummaryNode>, Error> {
    let sql = format!("SELECT {} FROM summary_nodes WHERE parent_id = $1 ORDER BY first_seq", rows::NODE);
    Ok(db.query(&sql, &[&id.0]).map_err(pg)?.iter().map(rows::node).collect())
}

/// The first `raw-archive` node of a session, by level then position (a partial index: nothing
/// is read when there are none).
pub(crate) fn first_raw_archive(
    db: &mut impl Queries,
    session: SessionId,
) -> Result<Option<SummaryNode>, Error> {
    let sql = format!(
        "SELECT {} FROM summary_nodes WHERE session_id = $1 AND summarizer = '{RAW_ARCHIVE}'
         ORDER BY level, first_seq LIMIT 1",
        rows::NODE
    );
    Ok(db.query_opt(&sql, &[&session.0]).map_err(pg)?.map(|row| rows::node(&row)))
}
