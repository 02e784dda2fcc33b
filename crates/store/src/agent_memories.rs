//! Agent memories: the user's `agent_memories` table, isolated per persona, and when a memory
//! expires ([`MemoryTtls`]).

use chrono::{DateTime, TimeDelta, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::db::query_all;
use crate::error::{Error, Missing, Result};
use crate::provenance::{self, MemoryVersion, Provenance};
use crate::search::HitKind;
use crate::sessions::{validate_name, validate_persona};
use crate::types::{Category, Memory, Writer, to_unix};
use crate::vectors;

/// The most characters a memory's content may hold.
pub const MAX_CONTENT_CHARS: usize = 500;
/// The most characters a key may hold.
pub const MAX_KEY_CHARS: usize = 64;

/// Time-to-live per memory category, counted from a memory's last write.
///
/// The decision (DESIGN leaves it open): a category is *user data* or *system data* by who
/// writes it. `user_preferences` is written by the user and is about the user: user data,
/// kept 90 days after its last write unless rewritten. `progress` and `memo` are written by the
/// agent to run its own work: system data, kept until deleted. Expired memories are invisible
/// to every tool at once and removed by `strata memory purge`.
///
/// In TOML each value is a number of days or `"never"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryTtls {
    /// User data. Default 90 days.
    pub user_preferences: Ttl,
    /// System data. Default never.
    pub progress: Ttl,
    /// System data. Default never.
    pub memo: Ttl,
}

impl Default for MemoryTtls {
    fn default() -> MemoryTtls {
        MemoryTtls { user_preferences: Ttl::Days(90), progress: Ttl::Never, memo: Ttl::Never }
    }
}

impl MemoryTtls {
    /// Nothing expires: what a compactor used without strata's configuration injects.
    pub const NEVER: MemoryTtls =
        MemoryTtls { user_preferences: Ttl::Never, progress: Ttl::Never, memo: Ttl::Never };

    /// The time-to-live of one category.
    pub(crate) fn get(&self, category: Category) -> Ttl {
        match category {
            Category::UserPreferences => self.user_preferences,
            Category::Progress => self.progress,
            Category::Memo => self.memo,
        }
    }

    /// Memories of `category` last written before this instant are expired; `None` if the
    /// category never expires.
    /// A time-to-live reaching back before the calendar begins expires nothing either.
    pub fn cutoff(&self, category: Category, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.get(category) {
            Ttl::Never => None,
            Ttl::Days(days) => now.checked_sub_signed(TimeDelta::try_days(i64::from(days))?),
        }
    }

    /// Whether a memory of `category` written at `updated_at` is expired at `now`: the one rule
    /// of expiry, which the tools, the injection and `strata memory purge` all apply.
    pub fn is_expired(&self, category: Category, updated_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        self.cutoff(category, now).is_some_and(|cutoff| updated_at < cutoff)
    }

    /// Whether `memory` is expired at `now`.
    pub fn is_memory_expired(&self, memory: &Memory, now: DateTime<Utc>) -> bool {
        self.is_expired(memory.category, memory.updated_at, now)
    }
}

/// How long a memory lives after its last write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Forever.
    Never,
    /// This many days.
    Days(u32),
}

impl Serialize for Ttl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ttl::Never => serializer.serialize_str("never"),
            Ttl::Days(days) => serializer.serialize_u32(*days),
        }
    }
}

impl<'de> Deserialize<'de> for Ttl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ttl, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Days(u32),
            Word(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Days(days) => Ok(Ttl::Days(days)),
            Raw::Word(word) if word == "never" => Ok(Ttl::Never),
            Raw::Word(word) => Err(serde::de::Error::custom(format!(
                "memory ttl must be a number of days or \"never\", not {word:?}"
            ))),
        }
    }
}

/// Turns free text into a snake_case key: lowercase letters and digits joined by single
/// underscores (`"Preferred Editor!"` becomes `preferred_editor`). `None` when nothing is left.
/// Non-ASCII letters are kept, lowercased, so keys in any script work.
pub fn normalize_key(raw: &str) -> Option<String> {
    let mut key = String::with_capacity(raw.len());
    let mut gap = false;
    for ch in raw.chars() {
        if ch.is_alphanumeric() {
            if gap && !key.is_empty() {
                key.push('_');
            }
            gap = false;
            // Some capitals lowercase to a letter plus a combining mark (`İ` is `i` + U+0307):
            // keep the letters only, so normalizing a normalized key changes nothing.
            key.extend(ch.to_lowercase().filter(|c| c.is_alphanumeric()));
        } else {
            gap = true;
        }
    }
    (!key.is_empty()).then_some(key)
}

/// A memory to write.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryWrite<'a> {
    /// Its category.
    pub category: Category,
    /// Its key; must already be normalized (see [`normalize_key`]).
    pub key: &'a str,
    /// Human-readable label.
    pub title: &'a str,
    /// Markdown or JSON, at most [`MAX_CONTENT_CHARS`] characters.
    pub content: &'a str,
}

/// The agent may not write the user's preferences ([`Error::ProtectedCategory`]).
pub fn check_writer(writer: Writer, category: Category) -> Result<()> {
    if writer == Writer::Agent && category == Category::UserPreferences {
        return Err(Error::ProtectedCategory);
    }
    Ok(())
}

/// The rules every memory obeys, whoever writes it: a snake_case key of at most
/// [`MAX_KEY_CHARS`], a title of at most 200 characters, content of 1 to [`MAX_CONTENT_CHARS`].
pub fn validate(memory: &MemoryWrite<'_>) -> Result<()> {
    // Long keys are refused, not cut: two keys sharing their first 64 characters would
    // otherwise overwrite each other.
    let chars = memory.key.chars().count();
    if chars > MAX_KEY_CHARS {
        return Err(Error::invalid(
            "key",
            format!("{chars} characters; a key holds at most {MAX_KEY_CHARS}"),
        ));
    }
    if normalize_key(memory.key).as_deref() != Some(memory.key) {
        return Err(Error::invalid(
            "key",
            format!("{:?} is not a snake_case key (try {:?})", memory.key, normalize_key(memory.key)),
        ));
    }
    validate_name("title", memory.title, 200)?;
    let chars = memory.content.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(Error::invalid(
            "content",
            format!("{chars} characters; a memory holds at most {MAX_CONTENT_CHARS}"),
        ));
    }
    if memory.content.trim().is_empty() {
        return Err(Error::invalid("content", "must not be empty"));
    }
    Ok(())
}

/// Inserts or replaces the memory `(category, key)` of a persona; returns it and whether it is
/// new. Call inside an immediate transaction, so that "new" is the truth even when several
/// writers race for the same key.
pub fn upsert(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    memory: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<(Memory, bool)> {
    check_writer(writer, memory.category)?;
    validate_persona(persona)?;
    validate(memory)?;
    let existed: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM agent_memories WHERE category = ?1 AND key = ?2 AND role = ?3)",
        )?
        .query_row(params![memory.category.as_str(), memory.key, persona], |row| row.get(0))?;
    // The stored vector no longer matches new text: clear it; the backlog trigger re-queues it.
    let sql = format!(
        "INSERT INTO agent_memories(category, key, title, content, updated_at, role)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(category, key, role) DO UPDATE SET
             title = excluded.title, content = excluded.content,
             updated_at = excluded.updated_at, embedding = NULL, valid_from = NULL, valid_to = NULL
         RETURNING {}",
        Memory::COLUMNS
    );
    let mut stored = conn.prepare_cached(&sql)?.query_row(
        params![memory.category.as_str(), memory.key, memory.title, memory.content, to_unix(now), persona],
        Memory::from_row,
    )?;
    provenance::record(conn, stored.id.0, memory.title, memory.content, provenance, now, None)?;
    stored.provenance = provenance::current(conn, stored.id.0)?;
    Ok((stored, !existed))
}

/// Checks a supersede of `current` at `at`, read at `now`: the rules both backends apply
/// before they write. A supersede is dated no later than now (what is true from a future time
/// is not known yet) and no earlier than the current text became true; a memory that already
/// stopped being true is not superseded again; a replacement names the same memory and says
/// something else.
pub fn check_supersede(
    current: &Memory,
    with: Option<&MemoryWrite<'_>>,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<()> {
    if at > now {
        return Err(Error::invalid(
            "at",
            format!("{at} is in the future; supersede with what is true already"),
        ));
    }
    if at < current.valid_from {
        return Err(Error::invalid(
            "at",
            format!("{at} is before the current text became true ({})", current.valid_from),
        ));
    }
    if let Some(to) = current.valid_to {
        return Err(Error::invalid("key", format!("{:?} stopped being true at {to} already", current.key)));
    }
    if let Some(with) = with {
        if with.category != current.category || with.key != current.key {
            return Err(Error::invalid(
                "with",
                format!("names {}/{}, not {}/{}", with.category, with.key, current.category, current.key),
            ));
        }
        validate(with)?;
        if with.title == current.title && with.content == current.content {
            return Err(Error::invalid("with", "says what the memory says already"));
        }
    }
    Ok(())
}

/// Supersedes the memory `(category, key)` of a persona: its text stopped being true at `at`,
/// and `with` (if given) is true from then on. The old text stays a version, dated; without
/// `with` the memory stays, ended, for history and search. Call inside an immediate
/// transaction.
#[allow(clippy::too_many_arguments)]
pub fn supersede(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
    with: Option<&MemoryWrite<'_>>,
    at: DateTime<Utc>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory> {
    check_writer(writer, category)?;
    let current = get(conn, persona, category, key)?.ok_or_else(|| missing(persona, category, key))?;
    check_supersede(&current, with, at, now)?;
    match with {
        Some(with) => {
            conn.prepare_cached(
                "UPDATE agent_memories SET title = ?2, content = ?3, updated_at = ?4, embedding = NULL,
                     valid_from = ?5, valid_to = NULL
                 WHERE id = ?1",
            )?
            .execute(params![
                current.id.0,
                with.title,
                with.content,
                to_unix(now),
                to_unix(at)
            ])?;
            provenance::record(conn, current.id.0, with.title, with.content, provenance, now, Some(at))?;
        }
        None => {
            conn.prepare_cached("UPDATE agent_memories SET valid_to = ?2 WHERE id = ?1")?
                .execute(params![current.id.0, to_unix(at)])?;
            conn.prepare_cached(
                "UPDATE memory_versions SET valid_to = ?2 WHERE memory_id = ?1 AND replaced_at IS NULL",
            )?
            .execute(params![current.id.0, to_unix(at)])?;
        }
    }
    get(conn, persona, category, key)?.ok_or_else(|| missing(persona, category, key))
}

/// Checks a merge of the memory `(category, key)` into `target`, the memory the merge writes
/// (as stored, if it is): the rules both backends apply before they write. A memory is not
/// merged into itself, and the memory it is merged into exists and is true now; the merged
/// memory's own checks are those of ending it ([`check_supersede`]).
pub fn check_merge(
    persona: &str,
    category: Category,
    key: &str,
    into: &MemoryWrite<'_>,
    target: Option<&Memory>,
) -> Result<()> {
    if (category, key) == (into.category, into.key) {
        return Err(Error::invalid("into", format!("{category}/{key} is the memory being merged")));
    }
    let target = target.ok_or_else(|| missing(persona, into.category, into.key))?;
    if let Some(to) = target.valid_to {
        return Err(Error::invalid("into", format!("{:?} stopped being true at {to}", target.key)));
    }
    validate(into)
}

/// Merges the memory `(category, key)` of a persona into `into` (the user's command, for two
/// memories of one meaning under two keys): the merged memory ends now, its text kept as a
/// dated version (history and search see it as a past fact), and `into` takes its new text as
/// a version whose provenance names the merge. Call inside an immediate transaction, so both
/// happen or neither.
pub fn merge(
    conn: &Connection,
    persona: &str,
    category: Category,
    key: &str,
    into: &MemoryWrite<'_>,
    provenance: &Provenance,
    now: DateTime<Utc>,
) -> Result<Memory> {
    let target = get(conn, persona, into.category, into.key)?;
    check_merge(persona, category, key, into, target.as_ref())?;
    supersede(conn, Writer::User, persona, category, key, None, now, provenance, now)?;
    Ok(upsert(conn, Writer::User, persona, into, provenance, now)?.0)
}

fn missing(persona: &str, category: Category, key: &str) -> Error {
    Error::NotFound(Missing::Memory { persona: persona.to_owned(), category, key: key.to_owned() })
}

/// The memories of a persona as they were at `at`: each one's text then, with its dates and
/// source; a memory written later is left out. By category then key; one category when given.
pub fn list_as_of(
    conn: &Connection,
    persona: &str,
    category: Option<Category>,
    at: DateTime<Utc>,
) -> Result<Vec<Memory>> {
    Ok(provenance::true_at(conn, persona, category.map(Category::as_str), at)?
        .into_iter()
        .filter_map(|(id, category, key, version)| {
            Some(Memory {
                id: crate::types::MemoryId(id),
                category: category.parse().ok()?,
                key,
                title: version.title,
                content: version.content,
                updated_at: version.written_at,
                persona: persona.to_owned(),
                provenance: Some(version.provenance),
                valid_from: version.valid_from,
                valid_to: version.valid_to,
            })
        })
        .collect())
}

/// One memory of a persona.
pub fn get(conn: &Connection, persona: &str, category: Category, key: &str) -> Result<Option<Memory>> {
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE role = ?1 AND category = ?2 AND key = ?3",
        Memory::COLUMNS
    );
    let found = conn
        .prepare_cached(&sql)?
        .query_row(params![persona, category.as_str(), key], Memory::from_row)
        .optional()?;
    found.map(|memory| with_provenance(conn, memory)).transpose()
}

fn with_provenance(conn: &Connection, mut memory: Memory) -> Result<Memory> {
    memory.provenance = provenance::current(conn, memory.id.0)?;
    Ok(memory)
}

/// Every version of a memory of a persona, newest first (the current one first); empty when
/// there is no such memory.
pub fn history(
    conn: &Connection,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<Vec<MemoryVersion>> {
    match get(conn, persona, category, key)? {
        Some(memory) => provenance::history(conn, memory.id.0),
        None => Ok(Vec::new()),
    }
}

/// The memories of a persona, by category then key; one category only when given.
pub fn list(conn: &Connection, persona: &str, category: Option<Category>) -> Result<Vec<Memory>> {
    let sql = format!(
        "SELECT {} FROM agent_memories WHERE role = ?1 AND (?2 IS NULL OR category = ?2)
         ORDER BY category, key",
        Memory::COLUMNS
    );
    query_all(conn, &sql, params![persona, category.map(Category::as_str)], Memory::from_row)?
        .into_iter()
        .map(|memory| with_provenance(conn, memory))
        .collect()
}

/// Deletes a memory (and its vector). Returns whether it existed.
pub fn delete(
    conn: &Connection,
    writer: Writer,
    persona: &str,
    category: Category,
    key: &str,
) -> Result<bool> {
    check_writer(writer, category)?;
    let id: Option<i64> = conn
        .prepare_cached(
            "DELETE FROM agent_memories WHERE role = ?1 AND category = ?2 AND key = ?3 RETURNING id",
        )?
        .query_row(params![persona, category.as_str(), key], |row| row.get(0))
        .optional()?;
    if let Some(id) = id {
        vectors::forget(conn, HitKind::Memory, id)?;
    }
    Ok(id.is_some())
}

/// Deletes the memories of `category` last written before `cutoff`; returns how many.
pub fn purge_older_than(conn: &Connection, category: Category, cutoff: DateTime<Utc>) -> Result<usize> {
    let ids: Vec<i64> = conn
        .prepare_cached("DELETE FROM agent_memories WHERE category = ?1 AND updated_at < ?2 RETURNING id")?
        .query_map(params![category.as_str(), to_unix(cutoff)], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for &id in &ids {
        vectors::forget(conn, HitKind::Memory, id)?;
    }
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};

    use super::{MemoryTtls, Ttl, normalize_key};
    use crate::types::Category;

    #[test]
    fn a_memory_expires_after_its_ttl_and_a_ttl_past_the_calendar_expires_nothing() {
        let now = Utc::now();
        let ttls = MemoryTtls { progress: Ttl::Days(u32::MAX), ..MemoryTtls::default() };
        let written = |days: i64| now - TimeDelta::days(days);
        assert!(ttls.is_expired(Category::UserPreferences, written(91), now));
        assert!(!ttls.is_expired(Category::UserPreferences, written(89), now));
        assert!(!ttls.is_expired(Category::Memo, written(100_000), now), "memo: never");
        assert_eq!(ttls.cutoff(Category::Progress, now), None);
        assert!(!MemoryTtls::NEVER.is_expired(Category::UserPreferences, written(100_000), now));
    }

    #[test]
    fn keys_normalize_to_snake_case() {
        assert_eq!(normalize_key("Preferred Editor!").as_deref(), Some("preferred_editor"));
        assert_eq!(normalize_key("  --already_snake--  ").as_deref(), Some("already_snake"));
        assert_eq!(normalize_key("CamelCase Key 2").as_deref(), Some("camelcase_key_2"));
        assert_eq!(normalize_key("言語 設定").as_deref(), Some("言語_設定"));
        assert_eq!(normalize_key("!!!"), None);
        assert_eq!(normalize_key("İstanbul").as_deref(), Some("istanbul"));
        for raw in ["İstanbul Trip", "ǅungla", "ΣΊΣΥΦΟΣ", "Straße"] {
            let once = normalize_key(raw).unwrap();
            assert_eq!(normalize_key(&once).as_deref(), Some(once.as_str()), "{raw}");
        }
        assert_eq!(normalize_key(&"a".repeat(200)).map(|k| k.len()), Some(200), "never cut");
    }
}
