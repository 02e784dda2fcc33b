//! Facts the offline summarizer can find without a model: what a person asked in so many words
//! to be remembered ("remember that …") and the preferences they stated ("from now on …",
//! "I prefer …"). Anything subtler is left to an LLM summarizer; the list is empty otherwise.

use strata_store::memories::{MAX_CONTENT_CHARS, MAX_KEY_CHARS, MemoryUpdate, normalize_key};
use strata_store::search::STOPWORDS;
use strata_store::{Category, Role};

use crate::summarizer::{MAX_MEMORY_UPDATES, SourceItem, truncate_chars};

/// The phrases that mark a statement, and what it becomes. Matched case-insensitively at a
/// word start; the fact is the rest of the sentence.
const MARKERS: &[(&str, Category)] = &[
    ("please remember that ", Category::Memo),
    ("remember that ", Category::Memo),
    ("from now on, ", Category::UserPreferences),
    ("from now on ", Category::UserPreferences),
    ("i'd prefer ", Category::UserPreferences),
    ("i would prefer ", Category::UserPreferences),
    ("i prefer ", Category::UserPreferences),
];

/// Characters of a title.
const TITLE_CHARS: usize = 80;
/// Content words a key is made of.
const KEY_WORDS: usize = 4;

/// The facts stated in so many words in the people's messages of a chunk, oldest first; a later
/// statement of the same key replaces an earlier one.
pub(crate) fn stated(items: &[SourceItem]) -> Vec<MemoryUpdate> {
    let mut found: Vec<MemoryUpdate> = Vec::new();
    for item in items.iter().filter(|item| item.origin.is(Role::User)) {
        for sentence in sentences(&item.text) {
            let Some(update) = statement(sentence, item.name.as_deref()) else { continue };
            found.retain(|earlier| earlier.key != update.key);
            found.push(update);
        }
    }
    // The newest statements matter most when there are too many.
    let excess = found.len().saturating_sub(MAX_MEMORY_UPDATES);
    found.drain(..excess);
    found
}

/// The fact of one sentence, if it holds a marker followed by something to keep.
fn statement(sentence: &str, speaker: Option<&str>) -> Option<MemoryUpdate> {
    let lower = sentence.to_lowercase();
    let (at, marker, category) = MARKERS.iter().find_map(|&(marker, category)| {
        let at = lower.match_indices(marker).map(|(at, _)| at).find(|&at| starts_word(&lower, at))?;
        Some((at, marker, category))
    })?;
    // `to_lowercase` can change lengths outside ASCII: cut the original only where it lines up.
    let rest = if lower.len() == sentence.len() {
        &sentence[at + marker.len()..]
    } else {
        &lower[at + marker.len()..]
    };
    let fact = rest.trim().trim_end_matches(['.', '!', ';', ',']).trim();
    let key = key_of(fact)?;
    let content = match (category, speaker) {
        (Category::UserPreferences, Some(name)) => format!("{name} prefers: {fact}"),
        (Category::UserPreferences, None) => format!("Prefers: {fact}"),
        (_, Some(name)) => format!("{name}: {fact}"),
        (_, None) => fact.to_owned(),
    };
    Some(MemoryUpdate {
        category,
        key,
        title: truncate_chars(&capitalize(fact), TITLE_CHARS),
        content: truncate_chars(&content, MAX_CONTENT_CHARS),
        // Stated in so many words: a new fact or news about one, checked as an update.
        edit: None,
    })
}

fn starts_word(text: &str, at: usize) -> bool {
    text[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
}

/// A key from the first content words of the fact; `None` when it has fewer than two (a fact
/// of "it" or "that" is not worth a memory).
fn key_of(fact: &str) -> Option<String> {
    let words: Vec<String> = fact
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| !STOPWORDS.contains(&word.as_str()))
        .take(KEY_WORDS)
        .collect();
    if words.len() < 2 {
        return None;
    }
    let key = normalize_key(&words.join(" "))?;
    Some(key.chars().take(MAX_KEY_CHARS).collect::<String>().trim_end_matches('_').to_owned())
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Sentences: cut after `.`, `!` or `?` followed by white space, and at line breaks.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').flat_map(|line| {
        let mut pieces = Vec::new();
        let mut start = 0;
        let bytes = line.as_bytes();
        for (at, c) in line.char_indices() {
            let next_is_space = bytes.get(at + 1).is_some_and(u8::is_ascii_whitespace);
            if matches!(c, '.' | '!' | '?') && next_is_space {
                pieces.push(&line[start..=at]);
                start = at + 1;
            }
        }
        pieces.push(&line[start..]);
        pieces.into_iter().map(str::trim).filter(|piece| !piece.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use crate::summarizer::Origin;

    use super::*;

    fn said(role: &str, name: Option<&str>, text: &str) -> SourceItem {
        SourceItem {
            reference: "message 1 (seq 0)".into(),
            origin: Origin::Message(role.parse().expect("a role")),
            name: name.map(str::to_owned),
            tool: None,
            calls: Vec::new(),
            time: Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).unwrap(),
            text: text.into(),
        }
    }

    #[test]
    fn explicit_statements_become_memos_and_proposed_preferences() {
        let items = [
            said("user", None, "Hi! From now on, indent Python with tabs. Thanks."),
            said("assistant", None, "Remember that the assistant's words are not the user's."),
            said("user", Some("Dana"), "ok. Please remember that the staging database is on port 5433!"),
            said("user", None, "I prefer short answers without emoji."),
        ];
        let facts = stated(&items);
        assert_eq!(facts.len(), 3, "{facts:#?}");
        assert_eq!(facts[0].category, Category::UserPreferences);
        assert_eq!(facts[0].key, "indent_python_tabs");
        assert_eq!(facts[0].content, "Prefers: indent Python with tabs");
        assert_eq!(facts[1].category, Category::Memo);
        assert_eq!(facts[1].key, "staging_database_port_5433");
        assert_eq!(facts[1].content, "Dana: the staging database is on port 5433");
        assert_eq!(facts[1].title, "The staging database is on port 5433");
        assert_eq!(facts[2].key, "short_answers_without_emoji");
    }

    #[test]
    fn ordinary_chat_states_nothing() {
        let items = [
            said("user", None, "Can you remember what we did yesterday? I can't remember that."),
            said("user", None, "The deploy failed; we prefer to wait. A preference for it? From now on."),
            said("user", None, "Remembering that is hard. I prefer it."),
        ];
        assert_eq!(stated(&items), Vec::new());
    }

    #[test]
    fn a_restated_key_keeps_the_newest_and_the_list_is_bounded() {
        let mut items = vec![said("user", None, "From now on, write commit messages in English.")];
        items.push(said("user", None, "From now on, write commit messages in English or German."));
        let facts = stated(&items);
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].key, "write_commit_messages_english");
        assert!(facts[0].content.ends_with("or German"), "{facts:?}");
        let many: Vec<SourceItem> = (0..20)
            .map(|n| said("user", None, &format!("Remember that server {n} runs build number {n}.")))
            .collect();
        let facts = stated(&many);
        assert_eq!(facts.len(), MAX_MEMORY_UPDATES);
        assert!(facts.last().unwrap().content.contains("server 19"));
    }

    #[test]
    fn long_and_non_ascii_facts_stay_within_the_memory_limits() {
        let long = format!("Remember that {}.", "the İstanbul office keeps spare keys ".repeat(40));
        let facts = stated(&[said("user", None, &long)]);
        assert_eq!(facts.len(), 1);
        assert!(facts[0].content.chars().count() <= MAX_CONTENT_CHARS);
        assert!(facts[0].key.chars().count() <= MAX_KEY_CHARS);
        assert_eq!(normalize_key(&facts[0].key).as_deref(), Some(facts[0].key.as_str()));
    }
}
