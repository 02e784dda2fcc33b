//! The rules of agent memories, whatever stores them: the limits, key normalization and
//! validation of a [`MemoryWrite`], who may write which category, when a memory expires, and the
//! checks a supersede or a merge passes before a backend writes it.

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Missing, Result};
use crate::provenance::Provenance;
use crate::sessions::validate_name;
use crate::types::{Category, Memory, QueuedUpdate, Writer};

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

/// What an accepted proposal is saved as: the user's memory of its category, sourced to the
/// proposal (and the summary that found it).
pub fn accepted(proposal: &QueuedUpdate) -> (MemoryWrite<'_>, Provenance) {
    let write = MemoryWrite {
        category: proposal.update.category,
        key: &proposal.update.key,
        title: &proposal.update.title,
        content: &proposal.update.content,
    };
    (write, Provenance::proposal(proposal.node_id))
}

fn missing(persona: &str, category: Category, key: &str) -> Error {
    Error::NotFound(Missing::Memory { persona: persona.to_owned(), category, key: key.to_owned() })
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
