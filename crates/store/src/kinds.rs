//! What each kind of searchable row is in SQL, in one table: messages, summary nodes and
//! agent memories each have a base table, a way to reach their persona, a time, perhaps a
//! session, a text, two full-text indexes and a vector table. Every search, lookup by id,
//! embedding backlog read and index catch-up builds its statements from [`Kind`], so a
//! second backend, or a new column, has one place to read what a kind is.
//!
//! The public fields are SQL both dialects read alike (PostgreSQL's backend builds its
//! statements from them too); the rest name SQLite's own indexes and the join that gives a row
//! its persona (PostgreSQL keeps the persona on each row).
//!
//! It also holds the other SQL both backends read alike: the row totals ([`ROW_TOTALS`]) and
//! the forest's checks ([`FOREST_CHECKS`]). The seam (strata-seam) holds no SQL.
//!
//! The aliases are fixed (`m` for messages, `n` for summary nodes, `a` for memories, `s` for
//! the session that gives messages and nodes their persona), so that the fragments compose.
//! Only the triggers of the schema (`schema/*.sql`) spell a kind's text again, for the
//! indexes they keep in sync: a memory's word-index text, and the trigram index's columns.

use rusqlite::types::Value;

use crate::search::index::Deferred;
use crate::search::{HitKind, SearchFilter};
use crate::types::to_unix;

/// One kind of searchable row, as SQL fragments.
#[derive(Debug)]
pub struct Kind {
    /// Which kind.
    pub kind: HitKind,
    /// The base table.
    pub table: &'static str,
    /// The base table's alias in every fragment below.
    pub alias: &'static str,
    /// The join that gives a row its persona (empty for memories, which hold it).
    pub(crate) persona_join: &'static str,
    /// The persona's column.
    pub(crate) persona: &'static str,
    /// The table that holds the persona's column, with its alias: what to read to learn
    /// which personas have rows of this kind without reading the rows.
    pub(crate) personas: &'static str,
    /// How many rows of the kind the persona bound to `?1` has, as cheaply as the schema
    /// allows: a message count from each session's last seq (seqs are dense from the session's
    /// first kept one: doctor checks it), one index lookup per session, not one per message.
    pub(crate) persona_rows: &'static str,
    /// The session's column; memories belong to a persona, not a session.
    pub session: Option<&'static str>,
    /// The time a search's range filters on: a message's, a summary's end, a memory's update.
    pub time: &'static str,
    /// The text a hit shows and `view`s read: a message's content, a summary's headline and
    /// body on two lines, a memory's `title: content`.
    pub text: &'static str,
    /// The text a keyword search cuts its excerpt from: [`Kind::text`], and a memory's key
    /// before it (the trigram index holds the key too).
    pub grep_text: &'static str,
    /// The text the word index ranks and the model embeds: a message with its speaker
    /// (`name: content`, since questions name people), the others as [`Kind::text`].
    pub ranked_text: &'static str,
    /// The hit columns every search selects, in
    /// [`TextHit::from_row`](crate::search::TextHit)'s order: id, session id, session key, seq,
    /// sender role (or `summary` / `memory`), level, category, key, time, a message's speaker.
    pub hit_columns: &'static str,
    /// The trigram full-text table (`memory_grep`; substrings, CJK).
    pub(crate) trigram: &'static str,
    /// Its columns, qualified: a short fragment's `LIKE` may match any of them.
    pub(crate) trigram_columns: &'static [&'static str],
    /// The base table's columns the trigram index holds, qualified by the alias: what a `LIKE`
    /// over rows not indexed yet tests.
    pub(crate) text_columns: &'static [&'static str],
    /// The word (Porter) full-text table (`memory_search`'s bm25).
    pub(crate) words: &'static str,
    /// The vector table (created for the embedding space in use).
    pub(crate) vectors: &'static str,
    /// Whether the rows are indexed after they are written, behind a cursor.
    pub(crate) deferred: Option<Deferred>,
}

impl Kind {
    /// Every kind.
    pub const ALL: [&'static Kind; 3] = [&MESSAGES, &SUMMARIES, &MEMORIES];

    /// The table of `kind`.
    pub fn of(kind: HitKind) -> &'static Kind {
        match kind {
            HitKind::Message => &MESSAGES,
            HitKind::Summary => &SUMMARIES,
            HitKind::Memory => &MEMORIES,
        }
    }

    /// The id column.
    pub(crate) fn id(&self) -> String {
        format!("{}.id", self.alias)
    }

    /// The base table with its alias, joined to what gives it a persona (`FROM` without the
    /// keyword).
    pub fn owned(&self) -> String {
        format!("{} {} {}", self.table, self.alias, self.persona_join).trim_end().to_owned()
    }

    /// Whether a search with this filter reads this kind: a session filter leaves out the
    /// kinds that have no session (memories belong to a persona).
    pub fn searched(&self, filter: &SearchFilter) -> bool {
        self.session.is_some() || filter.session.is_none()
    }

    /// The base table with its alias, to be joined on `id` (an expression naming the row's
    /// id), then joined to what gives it a persona: what follows a `JOIN` keyword.
    pub(crate) fn joined_on(&self, id: &str) -> String {
        format!("{} {alias} ON {alias}.id = {id} {}", self.table, self.persona_join, alias = self.alias)
            .trim_end()
            .to_owned()
    }

    /// `index`, a full-text table, joined to the rows it indexes and their persona.
    pub(crate) fn indexed_by(&self, index: &str) -> String {
        format!("{index} JOIN {}", self.joined_on(&format!("{index}.rowid")))
    }

    /// The conditions, joined by `AND`, that keep a search of this kind within the filter's
    /// persona, session and time range (its kinds and limit are not used), with their values in
    /// order. Memories have no session: a session filter leaves them out altogether, which the
    /// caller decides before it asks. The statement text depends only on which bounds are set.
    pub(crate) fn window(&self, filter: &SearchFilter) -> (Vec<String>, Vec<Value>) {
        let mut conditions = vec![format!("{} = ?", self.persona)];
        let mut values = vec![Value::Text(filter.persona.clone())];
        if let (Some(session), Some(column)) = (filter.session, self.session) {
            conditions.push(format!("{column} = ?"));
            values.push(Value::Integer(session.0));
        }
        if let Some(start) = filter.start {
            conditions.push(format!("{} >= ?", self.time));
            values.push(Value::Real(to_unix(start)));
        }
        if let Some(end) = filter.end {
            conditions.push(format!("{} < ?", self.time));
            values.push(Value::Real(to_unix(end)));
        }
        (conditions, values)
    }

    /// The statement text that reads the rows of this kind whose ids are in the JSON array
    /// bound to `?1`, belonging to the persona bound to `?2`: the hit columns, then `extra`.
    /// It starts from the ids (a CROSS JOIN: primary-key lookups) rather than from the
    /// persona's rows: with `IN (...)` SQLite chose to scan every message of the persona, 6 to
    /// 10 ms for 50 ids over 100,000 messages.
    pub(crate) fn by_ids(&self, extra: &str) -> String {
        format!(
            "SELECT {columns}, {extra} FROM (SELECT DISTINCT value AS id FROM json_each(?1)) ids
             CROSS JOIN {joined} WHERE {persona} = ?2",
            columns = self.hit_columns,
            joined = self.joined_on("ids.id"),
            persona = self.persona,
        )
    }
}

static MESSAGES: Kind = Kind {
    kind: HitKind::Message,
    table: "messages",
    alias: "m",
    persona_join: "JOIN sessions s ON s.id = m.session_id",
    persona: "s.role",
    personas: "sessions s",
    persona_rows: "SELECT coalesce(sum((SELECT max(m.seq) + 1 FROM messages m WHERE m.session_id = s.id) - s.first_seq), 0)
                   FROM sessions s WHERE s.role = ?1",
    session: Some("m.session_id"),
    time: "m.created_at",
    text: "m.content",
    grep_text: "m.content",
    ranked_text: "coalesce(m.name, m.role) || ': ' || m.content",
    hit_columns: "m.id, m.session_id, s.key, m.seq, m.role, CAST(NULL AS INTEGER), CAST(NULL AS TEXT), CAST(NULL AS TEXT), m.created_at, m.name",
    trigram: "messages_fts",
    trigram_columns: &["messages_fts.content"],
    text_columns: &["m.content"],
    words: "messages_words",
    vectors: "messages_vec",
    deferred: Some(Deferred::Messages),
};

static SUMMARIES: Kind = Kind {
    kind: HitKind::Summary,
    table: "summary_nodes",
    alias: "n",
    persona_join: "JOIN sessions s ON s.id = n.session_id",
    persona: "s.role",
    personas: "sessions s",
    persona_rows: "SELECT count(*) FROM summary_nodes n JOIN sessions s ON s.id = n.session_id WHERE s.role = ?1",
    session: Some("n.session_id"),
    time: "n.end_time",
    text: "n.headline || '\n' || n.body",
    grep_text: "n.headline || '\n' || n.body",
    ranked_text: "n.headline || '\n' || n.body",
    hit_columns: "n.id, n.session_id, s.key, CAST(NULL AS BIGINT), 'summary', n.level, CAST(NULL AS TEXT), CAST(NULL AS TEXT), n.end_time, CAST(NULL AS TEXT)",
    trigram: "summaries_fts",
    trigram_columns: &["summaries_fts.headline", "summaries_fts.body"],
    text_columns: &["n.headline", "n.body"],
    words: "summaries_words",
    vectors: "summaries_vec",
    deferred: Some(Deferred::Summaries),
};

static MEMORIES: Kind = Kind {
    kind: HitKind::Memory,
    table: "agent_memories",
    alias: "a",
    persona_join: "",
    persona: "a.role",
    personas: "agent_memories a",
    persona_rows: "SELECT count(*) FROM agent_memories a WHERE a.role = ?1",
    session: None,
    time: "a.updated_at",
    text: "a.title || ': ' || a.content",
    grep_text: "a.key || ' ' || a.title || ': ' || a.content",
    ranked_text: "a.title || ': ' || a.content",
    hit_columns: "a.id, CAST(NULL AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT), 'memory', CAST(NULL AS INTEGER), a.category, a.key, a.updated_at, CAST(NULL AS TEXT)",
    trigram: "memories_fts",
    trigram_columns: &["memories_fts.key", "memories_fts.title", "memories_fts.content"],
    text_columns: &["a.key", "a.title", "a.content"],
    words: "memories_words",
    vectors: "memories_vec",
    // Memories are indexed by triggers, in the transaction that writes them.
    deferred: None,
};

/// The row totals (`strata_seam::stats::RowTotals`): one row of four counts, in the order of
/// its fields. Both backends read it, so what counts as a compacted message is said once.
pub const ROW_TOTALS: &str = "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages),
                          (SELECT count(*) FROM messages WHERE summary_id IS NOT NULL),
                          (SELECT count(*) FROM agent_memories)";

/// The forest's checks, each one query whose rows are its problems, in SQL both backends read
/// alike (`strata doctor`): (what holds, the query).
pub const FOREST_CHECKS: [(&str, &str); 3] = [
    (
        "each merged node's parent is one level up and spans it",
        "SELECT 'node ' || c.id || ' (level ' || c.level || ', seq ' || c.first_seq || '-' || c.last_seq ||
                ') has parent ' || p.id || ' (level ' || p.level || ', seq ' || p.first_seq || '-' || p.last_seq || ')'
         FROM summary_nodes c JOIN summary_nodes p ON p.id = c.parent_id
         WHERE p.level <> c.level + 1 OR p.session_id <> c.session_id
            OR c.first_seq < p.first_seq OR c.last_seq > p.last_seq
            OR c.start_time < p.start_time - 0.001 OR c.end_time > p.end_time + 0.001",
    ),
    (
        "node time ranges run forward",
        "SELECT 'node ' || id || ' starts after it ends' FROM summary_nodes WHERE start_time > end_time",
    ),
    (
        "no two Level-0 nodes overlap",
        "SELECT 'nodes ' || a.id || ' and ' || b.id || ' overlap in session ' || a.session_id
         FROM summary_nodes a JOIN summary_nodes b
           ON a.session_id = b.session_id AND a.level = 0 AND b.level = 0 AND a.id < b.id
          AND a.first_seq <= b.last_seq AND b.first_seq <= a.last_seq",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_found_under_its_own_name() {
        for kind in Kind::ALL {
            assert_eq!(Kind::of(kind.kind).table, kind.table);
            assert!(kind.owned().starts_with(&format!("{} {}", kind.table, kind.alias)), "{}", kind.owned());
            assert_eq!(kind.hit_columns.split(", ").count(), 10, "{}", kind.table);
        }
    }
}
