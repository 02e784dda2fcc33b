//! The seam's rows as SQLite stores them: each row's columns, and how a row read becomes it.

use rusqlite::Row;

pub(crate) use strata_seam::backend::{from_unix, to_unix};
pub(crate) use strata_seam::memories::{Edit, MemoryUpdate, QueuedUpdate, UpdateId, Writer};
pub(crate) use strata_seam::{
    Category, Level, Memory, MemoryId, Message, MessageId, NewMessage, NewSummary, NodeId, Role, Session,
    SessionId, SummaryNode,
};

use crate::error::Error;

/// A row type this crate reads: the columns it selects, in the order [`FromRow::from_row`]
/// reads them.
pub(crate) trait FromRow: Sized {
    /// The columns, for a `SELECT`.
    const COLUMNS: &'static str;
    /// The row, from a row read with [`FromRow::COLUMNS`].
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self>;
}

impl FromRow for Session {
    const COLUMNS: &'static str = "id, key, role, created_at, last_active_at, last_bootstrap_at";

    fn from_row(row: &Row<'_>) -> rusqlite::Result<Session> {
        Ok(Session {
            id: row.get(0)?,
            key: row.get(1)?,
            persona: row.get(2)?,
            created_at: from_unix(row.get(3)?),
            last_active_at: from_unix(row.get(4)?),
            last_bootstrap_at: row.get::<_, Option<f64>>(5)?.map(from_unix),
        })
    }
}

impl FromRow for Message {
    const COLUMNS: &'static str = "m.id, m.session_id, m.seq, m.role, m.content, m.tool_calls, \
         m.tool_call_id, m.name, m.created_at, m.token_count, m.pinned, m.summary_id, m.body";

    fn from_row(row: &Row<'_>) -> rusqlite::Result<Message> {
        let role: String = row.get(3)?;
        let tool_calls: Option<String> = row.get(5)?;
        Ok(Message {
            id: row.get(0)?,
            session_id: row.get(1)?,
            seq: row.get(2)?,
            role: role.parse().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e))
            })?,
            content: row.get(4)?,
            tool_calls: tool_calls.map(|text| serde_json::from_str(&text)).transpose().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, Box::new(e))
            })?,
            tool_call_id: row.get(6)?,
            name: row.get(7)?,
            created_at: from_unix(row.get(8)?),
            token_count: row.get(9)?,
            pinned: row.get(10)?,
            summary_id: row.get(11)?,
            body: row.get(12)?,
        })
    }
}

impl FromRow for QueuedUpdate {
    const COLUMNS: &'static str = "id, role, node_id, category, key, title, content, state, created_at, edit";

    fn from_row(row: &Row<'_>) -> rusqlite::Result<QueuedUpdate> {
        let category: String = row.get(3)?;
        let state: String = row.get(7)?;
        Ok(QueuedUpdate {
            id: row.get(0)?,
            persona: row.get(1)?,
            node_id: row.get(2)?,
            update: MemoryUpdate {
                category: category.parse().map_err(|e: Error| {
                    rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e))
                })?,
                key: row.get(4)?,
                title: row.get(5)?,
                content: row.get(6)?,
                edit: row.get::<_, Option<String>>(9)?.as_deref().and_then(Edit::parse),
            },
            proposed: state == "proposed",
            created_at: from_unix(row.get(8)?),
        })
    }
}

impl FromRow for SummaryNode {
    const COLUMNS: &'static str = "n.id, n.session_id, n.level, n.parent_id, n.headline, n.body, \
         n.first_seq, n.last_seq, n.start_time, n.end_time, n.token_count, n.source_token_count, \
         n.summarizer, n.created_at";

    fn from_row(row: &Row<'_>) -> rusqlite::Result<SummaryNode> {
        Ok(SummaryNode {
            id: row.get(0)?,
            session_id: row.get(1)?,
            level: row.get(2)?,
            parent_id: row.get(3)?,
            headline: row.get(4)?,
            body: row.get(5)?,
            first_seq: row.get(6)?,
            last_seq: row.get(7)?,
            start_time: from_unix(row.get(8)?),
            end_time: from_unix(row.get(9)?),
            token_count: row.get(10)?,
            source_token_count: row.get(11)?,
            summarizer: row.get(12)?,
            created_at: from_unix(row.get(13)?),
        })
    }
}

impl FromRow for Memory {
    const COLUMNS: &'static str = "id, category, key, title, content, updated_at, role, valid_from, valid_to";

    fn from_row(row: &Row<'_>) -> rusqlite::Result<Memory> {
        let category: String = row.get(1)?;
        Ok(Memory {
            id: row.get(0)?,
            category: category.parse().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
            })?,
            key: row.get(2)?,
            title: row.get(3)?,
            content: row.get(4)?,
            updated_at: from_unix(row.get(5)?),
            persona: row.get(6)?,
            provenance: None,
            valid_from: from_unix(row.get::<_, Option<f64>>(7)?.unwrap_or(row.get(5)?)),
            valid_to: row.get::<_, Option<f64>>(8)?.map(from_unix),
        })
    }
}
