//! Overviews and lookups for the recall tools: hits by id, the browsing tools' reads
//! ([`Browsing`]), the embedding backlog filtered by persona or session, and vector counts.
//!
//! Every function that returns rows a tool shows takes the persona and filters by it in SQL.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, params};
use serde::Serialize;

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::search::{HitId, HitKind, TextHit};
use crate::store::Store;
use crate::types::{Message, MessageId, NodeId, Role, Session, SessionId, SummaryNode, from_unix};
use crate::vectors::BacklogItem;
use crate::{messages, nodes, sessions};

/// A session as the persona's history overview shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionOverview {
    /// Database id.
    pub id: SessionId,
    /// The caller's key.
    pub key: String,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// Time of its newest message.
    pub last_active_at: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: u64,
    /// How many of them no summary covers yet.
    pub uncompacted_messages: u64,
}

/// How many vectors each table holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VectorCounts {
    /// Message vectors.
    pub messages: u64,
    /// Summary vectors.
    pub summaries: u64,
    /// Memory vectors.
    pub memories: u64,
}

impl VectorCounts {
    /// All vectors.
    pub fn total(&self) -> u64 {
        self.messages + self.summaries + self.memories
    }
}

// The ids travel as one JSON array bound to a parameter, so the statement text never depends
// on how many there are. The CROSS JOIN makes SQLite start from the ids (primary-key lookups)
// rather than from the persona's sessions: with `IN (...)` it chose to scan every message of the
// persona, 6 to 10 ms for 50 ids over 100,000 messages.
const MESSAGE_HITS: &str =
    "SELECT m.id, m.session_id, s.key, m.seq, m.role, NULL, NULL, NULL, m.created_at, m.content
     FROM (SELECT DISTINCT value AS id FROM json_each(?1)) ids
     CROSS JOIN messages m ON m.id = ids.id JOIN sessions s ON s.id = m.session_id
     WHERE s.role = ?2";
const SUMMARY_HITS: &str =
    "SELECT n.id, n.session_id, s.key, NULL, 'summary', n.level, NULL, NULL, n.end_time,
            n.headline || char(10) || n.body
     FROM (SELECT DISTINCT value AS id FROM json_each(?1)) ids
     CROSS JOIN summary_nodes n ON n.id = ids.id JOIN sessions s ON s.id = n.session_id
     WHERE s.role = ?2";
const MEMORY_HITS: &str = "SELECT a.id, NULL, NULL, NULL, 'memory', NULL, a.category, a.key, a.updated_at,
            a.title || ': ' || a.content
     FROM (SELECT DISTINCT value AS id FROM json_each(?1)) ids
     CROSS JOIN agent_memories a ON a.id = ids.id
     WHERE a.role = ?2";

/// The rows with these ids that belong to `persona`, as hits whose snippet is the whole text
/// (unmarked) and whose rank is zero: messages first, then summaries, then memories. Ids of
/// other personas are silently absent.
pub fn hits_by_ids(conn: &Connection, persona: &str, ids: &[HitId]) -> Result<Vec<TextHit>> {
    let mut hits = Vec::new();
    for (kind, sql) in
        [(HitKind::Message, MESSAGE_HITS), (HitKind::Summary, SUMMARY_HITS), (HitKind::Memory, MEMORY_HITS)]
    {
        let of_kind: Vec<i64> = ids.iter().filter(|id| id.kind() == kind).map(|id| id.raw()).collect();
        if of_kind.is_empty() {
            continue;
        }
        let of_kind = serde_json::to_string(&of_kind).expect("integers serialize");
        hits.extend(query_all(conn, sql, params![of_kind, persona], |row| {
            TextHit::from_row(kind, row, None)
        })?);
    }
    Ok(hits)
}

/// The sessions of a persona with their message counts, oldest first.
pub fn session_overview(conn: &Connection, persona: &str) -> Result<Vec<SessionOverview>> {
    query_all(
        conn,
        "SELECT s.id, s.key, s.created_at, s.last_active_at,
                (SELECT count(*) FROM messages m WHERE m.session_id = s.id),
                (SELECT count(*) FROM messages m WHERE m.session_id = s.id AND m.summary_id IS NULL)
         FROM sessions s WHERE s.role = ?1 ORDER BY s.created_at, s.id",
        [persona],
        |row| {
            Ok(SessionOverview {
                id: row.get(0)?,
                key: row.get(1)?,
                created_at: from_unix(row.get(2)?),
                last_active_at: from_unix(row.get(3)?),
                messages: row.get::<_, i64>(4)? as u64,
                uncompacted_messages: row.get::<_, i64>(5)? as u64,
            })
        },
    )
}

const BACKLOG_FILTERED: [(HitKind, &str); 3] = [
    (
        HitKind::Memory,
        "SELECT b.item_id, a.role, a.title || ': ' || a.content, NULL FROM embedding_backlog b
         JOIN agent_memories a ON a.id = b.item_id
         WHERE b.kind = 'memory' AND (?2 IS NULL OR a.role = ?2) AND ?3 IS NULL
         ORDER BY b.item_id LIMIT ?1",
    ),
    (
        HitKind::Summary,
        "SELECT b.item_id, s.role, n.headline || char(10) || n.body, NULL FROM embedding_backlog b
         JOIN summary_nodes n ON n.id = b.item_id JOIN sessions s ON s.id = n.session_id
         WHERE b.kind = 'summary' AND (?2 IS NULL OR s.role = ?2) AND (?3 IS NULL OR s.id = ?3)
         ORDER BY b.item_id LIMIT ?1",
    ),
    (
        HitKind::Message,
        "SELECT b.item_id, s.role, coalesce(m.name, m.role) || ': ' || m.content, m.role
         FROM embedding_backlog b
         JOIN messages m ON m.id = b.item_id JOIN sessions s ON s.id = m.session_id
         WHERE b.kind = 'message' AND (?2 IS NULL OR s.role = ?2) AND (?3 IS NULL OR s.id = ?3)
         ORDER BY b.item_id LIMIT ?1",
    ),
];

/// Up to `limit` backlog rows, optionally of one persona or one session only (a session has no
/// memories: they belong to the persona). Memories first, then summaries, then messages.
pub fn backlog_filtered(
    conn: &Connection,
    persona: Option<&str>,
    session: Option<SessionId>,
    limit: usize,
) -> Result<Vec<BacklogItem>> {
    let mut items = Vec::new();
    for (kind, sql) in BACKLOG_FILTERED {
        let left = limit.saturating_sub(items.len());
        if left == 0 {
            break;
        }
        items.extend(query_all(conn, sql, params![left as i64, persona, session], |row| {
            let role: Option<String> = row.get(3)?;
            let message_role = role.map(|role| role.parse::<Role>()).transpose().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e))
            })?;
            Ok(BacklogItem {
                id: HitId::new(kind, row.get(0)?),
                persona: row.get(1)?,
                text: row.get(2)?,
                message_role,
            })
        })?);
    }
    Ok(items)
}

/// How many backlog rows match the filter of [`backlog_filtered`].
pub fn backlog_count(conn: &Connection, persona: Option<&str>, session: Option<SessionId>) -> Result<u64> {
    let count: i64 = conn
        .prepare_cached(
            "SELECT
               (SELECT count(*) FROM embedding_backlog b JOIN agent_memories a ON a.id = b.item_id
                WHERE b.kind = 'memory' AND (?1 IS NULL OR a.role = ?1) AND ?2 IS NULL)
             + (SELECT count(*) FROM embedding_backlog b JOIN summary_nodes n ON n.id = b.item_id
                JOIN sessions s ON s.id = n.session_id
                WHERE b.kind = 'summary' AND (?1 IS NULL OR s.role = ?1) AND (?2 IS NULL OR s.id = ?2))
             + (SELECT count(*) FROM embedding_backlog b JOIN messages m ON m.id = b.item_id
                JOIN sessions s ON s.id = m.session_id
                WHERE b.kind = 'message' AND (?1 IS NULL OR s.role = ?1) AND (?2 IS NULL OR s.id = ?2))",
        )?
        .query_row(params![persona, session], |row| row.get(0))?;
    Ok(count as u64)
}

/// How many vectors (chunks) each table holds; zero before anything was embedded.
pub fn vector_counts(conn: &Connection) -> Result<VectorCounts> {
    if crate::vectors::space(conn)?.is_none() {
        return Ok(VectorCounts::default());
    }
    let count = |kind: HitKind| -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {}", crate::vectors::table(kind));
        Ok(conn.prepare_cached(&sql)?.query_row([], |row| row.get::<_, i64>(0))? as u64)
    };
    Ok(VectorCounts {
        messages: count(HitKind::Message)?,
        summaries: count(HitKind::Summary)?,
        memories: count(HitKind::Memory)?,
    })
}

/// The reads of the browsing tools over one [`Store`] ([`Store::browsing`]): lookups by id as
/// seen from a persona (another persona's row is [`Error::NotFound`], exactly like one that does
/// not exist), a persona's sessions, and a session's newest uncovered messages.
#[derive(Clone, Copy, Debug)]
pub struct Browsing<'a> {
    store: &'a Store,
}

impl Store {
    /// The reads of the browsing tools.
    pub fn browsing(&self) -> Browsing<'_> {
        Browsing { store: self }
    }
}

impl Browsing<'_> {
    /// One message by id, as seen from `persona`, with its session.
    pub fn message(&self, persona: &str, id: MessageId) -> Result<(Message, Session)> {
        self.store.read(|conn| {
            let message = messages::by_id(conn, id)?;
            let session = sessions::by_id(conn, message.session_id)?;
            if session.persona != persona {
                return Err(Error::NotFound(Missing::Message(id)));
            }
            Ok((message, session))
        })
    }

    /// One node by id, as seen from `persona`, with its session.
    pub fn node(&self, persona: &str, id: NodeId) -> Result<(SummaryNode, Session)> {
        self.store.read(|conn| {
            let node = nodes::by_id(conn, id)?;
            let session = sessions::by_id(conn, node.session_id)?;
            if session.persona != persona {
                return Err(Error::NotFound(Missing::Node(id)));
            }
            Ok((node, session))
        })
    }

    /// The sessions of a persona with message counts, oldest first.
    pub fn sessions(&self, persona: &str) -> Result<Vec<SessionOverview>> {
        self.store.read(|conn| session_overview(conn, persona))
    }

    /// The newest `limit` messages of a session that no summary covers yet, oldest first.
    pub fn recent_uncovered(&self, session: SessionId, limit: usize) -> Result<Vec<Message>> {
        self.store.read(|conn| {
            let sql = format!(
                "SELECT * FROM (SELECT {} FROM messages m WHERE m.session_id = ?1 AND m.summary_id IS NULL
                 ORDER BY m.seq DESC LIMIT ?2) ORDER BY seq",
                Message::COLUMNS
            );
            query_all(conn, &sql, params![session, limit as i64], Message::from_row)
        })
    }
}
