//! `save_memory`, memory expiry and purge.
//!
//! The agent writes `progress` and `memo` only; `user_preferences` are the user's. A new key
//! close to a live key of the persona (edit distance, word set, or, with the model, the meaning
//! of the keys or of the whole memories, in any script) is refused with the existing key named
//! unless `allow_new_key`, so a memory is updated rather than forked into near-twins. Queued
//! facts from summaries are settled through the same rules, a twin updating the memory it is
//! close to, which its history and the log record.

use chrono::{DateTime, Utc};
use serde::Serialize;
use strata_seam::memories::{
    Edit, MAX_CONTENT_CHARS, MemoryWrite, Provenance, QueuedUpdate, Writer, normalize_key,
};
use strata_seam::{Backend, Category, Memory};

use super::{MemoryListArgs, SaveMemoryArgs, curate};
use crate::config::RecallConfig;
use crate::embed::{Embedder, cosine};
use crate::error::{Error, Result};
use crate::time::{Bound, parse_bound};

/// The answer of `save_memory`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SaveAnswer {
    /// Always true (a refusal is an error).
    pub saved: bool,
    /// True if the key is new, false if an existing memory was updated.
    pub created: bool,
    /// The key as given, when normalization changed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_normalized_from: Option<String>,
    /// The memory as stored.
    pub memory: Memory,
}

/// The live memories of a persona (not expired, still true), optionally of one category.
pub fn live_memories(
    store: &dyn Backend,
    persona: &str,
    category: Option<Category>,
    config: &RecallConfig,
    now: DateTime<Utc>,
) -> Result<Vec<Memory>> {
    let mut memories = store.memories(persona, category)?;
    memories.retain(|memory| !config.memory_ttls.is_memory_expired(memory, now) && !memory.ended_by(now));
    Ok(memories)
}

/// The answer of `memory_list`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ListAnswer {
    /// This page, newest first.
    pub memories: Vec<Memory>,
    /// How many match in all.
    pub total: usize,
    /// Where the next page starts (pass it as `offset`); `null` on the last page.
    pub next_offset: Option<usize>,
}

/// `memory_list`: the live memories of `persona`, newest first, filtered and paged; with
/// `as_of`, the text each had at that time (superseded texts included), with its dates.
pub fn list(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    args: &MemoryListArgs,
    now: DateTime<Utc>,
) -> Result<ListAnswer> {
    let category = match args.category.as_deref() {
        None => None,
        Some(name) => Some(name.parse::<Category>().map_err(|_| {
            Error::invalid("category", format!("{name:?} is not user_preferences, progress or memo"))
        })?),
    };
    let limit = match args.limit {
        Some(0) => return Err(Error::invalid("limit", "must be at least 1 (at most 100)")),
        Some(n) => (n as usize).min(100),
        None => 20,
    };
    let mut memories = match args.as_of.as_deref().filter(|text| !text.trim().is_empty()) {
        None => live_memories(store, persona, category, config, now)?,
        Some(text) => {
            let at = parse_bound("as_of", text, Bound::Start)?;
            // What expired is gone for every tool, whatever the time asked about.
            let mut memories = store.memories_as_of(persona, category, at)?;
            memories.retain(|memory| !config.memory_ttls.is_memory_expired(memory, now));
            memories
        }
    };
    if let Some(prefix) = &args.key_prefix {
        let prefix = normalize_key(prefix).unwrap_or_default();
        memories.retain(|memory| memory.key.starts_with(&prefix));
    }
    memories.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(b.id.0.cmp(&a.id.0)));
    let total = memories.len();
    let offset = args.offset.unwrap_or(0) as usize;
    let page: Vec<Memory> = memories.into_iter().skip(offset).take(limit).collect();
    let next_offset = (offset + page.len() < total).then_some(offset + page.len());
    Ok(ListAnswer { memories: page, total, next_offset })
}

/// Deletes every expired memory (all personas); returns how many per category.
pub fn purge_expired(
    store: &dyn Backend,
    config: &RecallConfig,
    now: DateTime<Utc>,
) -> Result<Vec<(Category, usize)>> {
    let span = super::memory_span::purge();
    let _entered = span.enter();
    let mut purged = Vec::new();
    for category in Category::ALL {
        if let Some(cutoff) = config.memory_ttls.cutoff(category, now) {
            purged.push((category, store.purge_memories(category, cutoff)?));
        }
    }
    super::memory_span::deleted(&span, purged.iter().map(|(_, count)| count).sum());
    Ok(purged)
}

fn words(key: &str) -> Vec<&str> {
    let mut words: Vec<&str> = key.split('_').filter(|w| !w.is_empty()).collect();
    words.sort_unstable();
    words
}

/// How close `existing` is to `key`, if it is a near-duplicate: higher is closer.
fn closeness(config: &RecallConfig, key: &str, existing: &str) -> Option<f64> {
    if key == existing {
        return Some(2.0);
    }
    if words(key) == words(existing) {
        return Some(1.5);
    }
    let similarity = strsim::normalized_levenshtein(key, existing);
    let edits = strsim::levenshtein(key, existing);
    // Edit distance alone would call any two short keys twins ("cpu" / "gpu" are different).
    let shortest = key.chars().count().min(existing.chars().count());
    let close_by_edits = edits <= config.near_duplicate_edits && shortest > 2 * config.near_duplicate_edits;
    (close_by_edits || similarity >= config.near_duplicate_similarity).then_some(similarity)
}

/// How a new key was found close to an existing one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Likeness {
    /// Spelled alike: the same words, or a few edits apart.
    Spelling,
    /// Alike in meaning: the cosine similarity of the two memories' texts.
    Meaning {
        /// The cosine similarity.
        similarity: f32,
    },
    /// Written in two scripts, and the names in Latin letters the other-script memory holds
    /// (`Aula Internacional`, `DELE`, `Chopin`) are nearly all in the Latin one too.
    Names {
        /// Names both hold.
        shared: usize,
        /// Names the other-script memory holds.
        of: usize,
    },
}

impl std::fmt::Display for Likeness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Likeness::Spelling => write!(f, "by spelling"),
            Likeness::Meaning { similarity } => write!(f, "by meaning (cosine {similarity:.2})"),
            Likeness::Names { shared, of } => write!(f, "by the names both hold ({shared} of {of})"),
        }
    }
}

/// The text a memory is compared by meaning with: its key's words, its title when that says
/// more than the key, and its content (`standard japanese: Standard Japanese textbook. User
/// works through ...`); empty parts are left out. The key and title alone are a few words,
/// often in another script than their twin's, which an English model cannot bridge; the
/// content carries the names and numbers both twins share (benches/README.md, "Memory keys by
/// meaning").
pub fn meaning_text(key: &str, title: &str, content: &str) -> String {
    let mut text = key.replace('_', " ");
    let title = title.trim();
    if !title.is_empty() && normalize_key(title).as_deref() != Some(key) {
        text.push_str(": ");
        text.push_str(title);
    }
    let content = content.trim();
    if !content.is_empty() {
        text.push_str(". ");
        text.push_str(content);
    }
    text
}

/// The writing system a key and title are mostly written in: what decides whether two memories
/// are compared within a script or across scripts, where the English-trained model's cosines
/// run lower (only the names and numbers both texts share count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Script {
    /// Latin letters (and anything not named below; also a key with no letters).
    Latin,
    /// Chinese, Japanese or Korean characters: each character counts as a word.
    Cjk,
    /// Cyrillic.
    Cyrillic,
    /// Greek.
    Greek,
    /// Arabic.
    Arabic,
    /// Hebrew.
    Hebrew,
    /// Devanagari.
    Devanagari,
    /// Thai.
    Thai,
}

impl Script {
    /// The script of one character, `None` for what is not a letter.
    fn of(c: char) -> Option<Script> {
        let script = match c as u32 {
            0x3040..=0x30FF      // hiragana, katakana
            | 0x3400..=0x4DBF    // CJK extension A
            | 0x4E00..=0x9FFF    // CJK unified ideographs
            | 0xAC00..=0xD7AF    // Hangul syllables
            | 0xF900..=0xFAFF => Script::Cjk, // CJK compatibility ideographs
            0x0400..=0x052F => Script::Cyrillic,
            0x0370..=0x03FF | 0x1F00..=0x1FFF => Script::Greek,
            0x0600..=0x06FF | 0x0750..=0x077F => Script::Arabic,
            0x0590..=0x05FF => Script::Hebrew,
            0x0900..=0x097F => Script::Devanagari,
            0x0E00..=0x0E7F => Script::Thai,
            _ if c.is_alphabetic() => Script::Latin,
            _ => return None,
        };
        Some(script)
    }
}

impl Script {
    /// Whether the embedding model (trained on English, with Chinese characters and kana in its
    /// vocabulary) reads a key of this script as words rather than as unknown pieces.
    pub fn has_model_words(self) -> bool {
        matches!(self, Script::Latin | Script::Cjk)
    }
}

/// The script a key and title are mostly written in: each CJK character counts as a word,
/// against the words (runs of letters) of each other script; the most wins, Latin on a tie.
pub fn script_of(key: &str, title: &str) -> Script {
    let mut counts: std::collections::HashMap<Script, usize> = std::collections::HashMap::new();
    let mut previous = None;
    for c in key.chars().chain(std::iter::once(' ')).chain(title.chars()) {
        let script = Script::of(c);
        if let Some(script) = script
            && (script == Script::Cjk || previous != Some(script))
        {
            *counts.entry(script).or_default() += 1;
        }
        previous = script;
    }
    let latin = counts.get(&Script::Latin).copied().unwrap_or(0);
    counts.into_iter().filter(|(_, n)| *n > latin).max_by_key(|(_, n)| *n).map_or(Script::Latin, |(s, _)| s)
}

/// True when a key and title are written mostly in Chinese, Japanese or Korean characters.
pub fn mostly_cjk(key: &str, title: &str) -> bool {
    script_of(key, title) == Script::Cjk
}

/// The vectors of memory texts embedded so far: settling a summary's facts compares each with
/// every live memory of its persona, whose texts are the same from one fact to the next, so
/// they are embedded once per run rather than once per fact.
#[derive(Debug, Default)]
pub(crate) struct TextVectors(std::collections::HashMap<String, Vec<f32>>);

impl TextVectors {
    /// The vectors of `texts`, in order, embedding only those not seen before.
    fn embed(&mut self, embedder: &Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut missing: Vec<&String> = texts.iter().filter(|text| !self.0.contains_key(*text)).collect();
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let vectors = embedder.embed(&missing)?;
            for (text, vector) in missing.into_iter().zip(vectors) {
                self.0.insert(text.clone(), vector);
            }
        }
        Ok(texts.iter().map(|text| self.0[text].clone()).collect())
    }
}

/// The names in Latin letters a text holds: words of at least three characters with a Latin
/// letter (`aula`, `cs50p`, `chopin`), lowercased, leaving out a few English function words.
fn latin_names(text: &str) -> std::collections::BTreeSet<String> {
    const FUNCTION_WORDS: [&str; 8] = ["the", "and", "for", "with", "from", "that", "this", "not"];
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .filter(|word| word.chars().all(|c| c.is_ascii_digit() || Script::of(c) == Some(Script::Latin)))
        .filter(|word| word.chars().any(|c| Script::of(c) == Some(Script::Latin)))
        .map(str::to_lowercase)
        .filter(|word| !FUNCTION_WORDS.contains(&word.as_str()))
        .collect()
}

/// Whether two memories of which one is in Latin letters and the other in another script name
/// the same things: at least two names, and three quarters of the other-script memory's names,
/// are in the Latin one. The English-trained model reads Cyrillic, kana or Arabic as unknown
/// pieces, so their cosine with an English twin stays low (0.42 for a Spanish course in Russian
/// and in English, benches/README.md "Memory keys by meaning"); the names the two share
/// (a textbook, an exam, a composer) are what it cannot see.
fn shared_names(proposed: &MemoryWrite<'_>, existing: &Memory) -> Option<Likeness> {
    let (proposed_script, existing_script) =
        (script_of(proposed.key, proposed.title), script_of(&existing.key, &existing.title));
    let proposed = meaning_text(proposed.key, proposed.title, proposed.content);
    let existing = meaning_text(&existing.key, &existing.title, &existing.content);
    let (latin, other) = match (proposed_script, existing_script) {
        (Script::Latin, Script::Latin) => return None,
        (Script::Latin, _) => (latin_names(&proposed), latin_names(&existing)),
        (_, Script::Latin) => (latin_names(&existing), latin_names(&proposed)),
        _ => return None,
    };
    let shared = other.intersection(&latin).count();
    (shared >= 2 && shared * 4 >= other.len() * 3).then_some(Likeness::Names { shared, of: other.len() })
}

/// The live memory `proposed` would be a twin of, and how it is alike: by spelling first (no
/// model needed), then by the names two memories in different scripts share (no model
/// needed), then, when the model is loaded, by meaning: the higher cosine of their keys' words
/// and of their whole texts, above the threshold for their scripts. Without the model only
/// spelling and names are checked.
fn near_duplicate<'m>(
    config: &RecallConfig,
    embedder: Option<&Embedder>,
    vectors: &mut TextVectors,
    proposed: &MemoryWrite<'_>,
    live: &'m [Memory],
) -> Result<Option<(&'m Memory, Likeness)>> {
    let others: Vec<&Memory> =
        live.iter().filter(|m| !(m.category == proposed.category && m.key == proposed.key)).collect();
    let by_spelling = others
        .iter()
        .filter_map(|m| closeness(config, proposed.key, &m.key).map(|c| (c, *m)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, m)| (m, Likeness::Spelling));
    if by_spelling.is_some() || others.is_empty() {
        return Ok(by_spelling);
    }
    let by_names = others
        .iter()
        .filter_map(|m| shared_names(proposed, m).map(|likeness| (likeness, *m)))
        .max_by_key(|(likeness, _)| match likeness {
            Likeness::Names { shared, of } => (*shared, usize::MAX - of),
            _ => (0, 0),
        })
        .map(|(likeness, m)| (m, likeness));
    if by_names.is_some() {
        return Ok(by_names);
    }
    let Some(embedder) = embedder else { return Ok(None) };
    // Two texts per memory: its key's words, and its whole text. The key alone is the surest
    // sign within a script (`db_password_rotation` / `database_password_rotation` whatever
    // their titles say); the whole text is what carries a memory across scripts.
    let texts: Vec<String> = std::iter::once(proposed.key)
        .chain(others.iter().map(|m| m.key.as_str()))
        .map(|key| meaning_text(key, "", ""))
        .chain(std::iter::once(meaning_text(proposed.key, proposed.title, proposed.content)))
        .chain(others.iter().map(|m| meaning_text(&m.key, &m.title, &m.content)))
        .collect();
    let vectors = vectors.embed(embedder, &texts)?;
    let (keys, wholes) = vectors.split_at(others.len() + 1);
    let script = script_of(proposed.key, proposed.title);
    Ok(others
        .iter()
        .enumerate()
        .map(|(at, m)| {
            let whole = cosine(&wholes[0], &wholes[at + 1]);
            // The keys alone count only in the scripts the model has words for: two Greek or
            // Cyrillic keys are mostly unknown pieces to it and look alike whatever they say
            // (0.79 for a marathon and a cooking class, benches/README.md).
            let similarity = if script_of(&m.key, &m.title) == script && script.has_model_words() {
                cosine(&keys[0], &keys[at + 1]).max(whole)
            } else {
                whole
            };
            (similarity, *m)
        })
        .filter(|(similarity, m)| {
            let threshold = if script_of(&m.key, &m.title) == script {
                config.near_duplicate_meaning
            } else {
                config.near_duplicate_meaning_across_scripts
            };
            f64::from(*similarity) >= threshold
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(similarity, m)| (m, Likeness::Meaning { similarity })))
}

/// Live memories of a persona that look like one memory under several keys: what `strata
/// memory twins` proposes to the user to merge into the oldest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Twins {
    /// The oldest of them (by id), which a merge keeps.
    pub kept: Memory,
    /// The others, oldest first, each with how it is alike the memory it was found a twin of
    /// (`kept`, or another of these).
    pub twins: Vec<Twin>,
}

/// One memory of [`Twins`] beside the kept one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Twin {
    /// The memory.
    pub memory: Memory,
    /// The key of the memory it was found a twin of.
    pub of: String,
    /// How they are alike.
    pub likeness: Likeness,
}

/// The persona's live memories that are twins by the rules `save_memory` applies to a new key
/// (spelling, shared names across scripts, and with `embedder` meaning), gathered into groups:
/// two memories are in one group when a chain of twins links them, so a triple whose third
/// key is alike only one of the others is still one group. Memories written before the model
/// was loaded were checked without meaning: this finds what that check let in.
pub fn twins(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
) -> Result<Vec<Twins>> {
    let mut live = live_memories(store, persona, None, config, Utc::now())?;
    live.sort_by_key(|memory| memory.id.0);
    let mut vectors = TextVectors::default();
    // Each memory's group, as the index of the oldest memory in it.
    let mut group: Vec<usize> = (0..live.len()).collect();
    let mut links = Vec::new();
    for at in 0..live.len() {
        let memory = &live[at];
        let write = MemoryWrite {
            category: memory.category,
            key: &memory.key,
            title: &memory.title,
            content: &memory.content,
        };
        // Each memory is compared with the older ones only, so a pair is found once.
        if let Some((older, likeness)) = near_duplicate(config, embedder, &mut vectors, &write, &live[..at])?
        {
            let older = live.iter().position(|m| m.id == older.id).unwrap_or(at);
            let (from, to) = (group[at], group[older]);
            for g in &mut group {
                if *g == from {
                    *g = to;
                }
            }
            links.push((at, older, likeness));
        }
    }
    let mut found: Vec<Twins> = Vec::new();
    for (at, older, likeness) in links {
        let kept = &live[group[at]];
        let twin = Twin { memory: live[at].clone(), of: live[older].key.clone(), likeness };
        match found.iter_mut().find(|twins| twins.kept.id == kept.id) {
            Some(twins) => twins.twins.push(twin),
            None => found.push(Twins { kept: kept.clone(), twins: vec![twin] }),
        }
    }
    Ok(found)
}

/// `save_memory`: the agent's upsert into `progress` or `memo` of `persona`.
///
/// Refused: `user_preferences` (only the user writes them), content over 500 characters, a key
/// with no letters or digits, and a *new* key that is close to an existing live key of the
/// persona (any category) by spelling or meaning, unless `allow_new_key` is set: the error
/// names the existing key so the model updates it instead of forking a twin.
pub fn save(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
    args: &SaveMemoryArgs,
    provenance: &Provenance,
) -> Result<SaveAnswer> {
    save_checked(store, persona, config, embedder, &mut TextVectors::default(), args, provenance)
}

/// [`save`], with the vectors of memory texts embedded so far.
fn save_checked(
    store: &dyn Backend,
    persona: &str,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
    vectors: &mut TextVectors,
    args: &SaveMemoryArgs,
    provenance: &Provenance,
) -> Result<SaveAnswer> {
    let category: Category = match args.category.trim() {
        "user_preferences" => {
            return Err(Error::Store(strata_seam::Error::ProtectedCategory));
        }
        other => other.parse().map_err(|_| {
            Error::invalid(
                "category",
                format!("{other:?} is not a category you can write; use progress or memo"),
            )
        })?,
    };
    let key = normalize_key(&args.key)
        .ok_or_else(|| Error::invalid("key", format!("{:?} has no letters or digits", args.key)))?;
    // A memory is derived text, shown in later contexts: a pasted key is masked before it is
    // measured and saved (the message it came from keeps it).
    let content = config.secret_patterns.mask(&args.content);
    let title = config.secret_patterns.mask(args.title.trim());
    let chars = content.chars().count();
    if chars > MAX_CONTENT_CHARS {
        return Err(Error::invalid(
            "content",
            format!(
                "{chars} characters; a memory holds at most {MAX_CONTENT_CHARS} characters, so shorten it"
            ),
        ));
    }
    let now = Utc::now();
    let live = live_memories(store, persona, None, config, now)?;
    let exists = live.iter().any(|m| m.category == category && m.key == key);
    let write = MemoryWrite { category, key: &key, title: &title, content: &content };
    if !exists
        && !args.allow_new_key.unwrap_or(false)
        && let Some((existing, likeness)) = near_duplicate(config, embedder, vectors, &write, &live)?
    {
        return Err(Error::NearDuplicateKey {
            key: key.clone(),
            existing_key: existing.key.clone(),
            existing_category: existing.category,
            likeness,
        });
    }
    if let Some(text) = args.true_since.as_deref().filter(|text| !text.trim().is_empty()) {
        let since = parse_bound("true_since", text, Bound::Start)?;
        if exists {
            let memory = store.supersede_memory(
                Writer::Agent,
                persona,
                category,
                &key,
                Some(&write),
                since,
                provenance,
            )?;
            return Ok(SaveAnswer {
                saved: true,
                created: false,
                key_normalized_from: (args.key != key).then(|| args.key.clone()),
                memory,
            });
        }
    }
    // Whether the key is new is decided by the write itself: another writer may have created
    // it since `live` was read.
    let (memory, created) = store.save_memory(Writer::Agent, persona, &write, provenance)?;
    Ok(SaveAnswer {
        saved: true,
        created,
        key_normalized_from: (args.key != key).then(|| args.key.clone()),
        memory,
    })
}

/// What [`settle_memory_updates`] did with the facts summarizers found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Settled {
    /// Saved (created or updated) as the agent's `progress` or `memo` memories.
    pub saved: usize,
    /// Preferences proposed to the user (`strata memory proposals`).
    pub proposed: usize,
    /// Updates held back as proposals for the user: they dropped more of the memory than
    /// `max_dropped_share` without saying its content stopped being true.
    pub held: usize,
    /// Memories superseded: their old content stopped being true, and stays in the history.
    pub superseded: usize,
    /// Refused by the memory rules (too long, no key, a twin of a user preference, nothing
    /// new); logged with the reason.
    pub dropped: usize,
    /// Of the saved, those proposed under a new key that were near-duplicates of an existing
    /// memory, and updated it instead (logged, and named in the version's provenance).
    pub merged: usize,
    /// True when facts were checked for twins by spelling only, because no embedding model
    /// was loaded: a twin in other words or another script is then saved under its own key.
    pub spelling_only: bool,
}

/// Facts read from the queue per transaction.
const SETTLE_BATCH: usize = 64;

/// Settles the facts summarizers queued with their nodes (schema 7), oldest first, every
/// persona: a `progress` or `memo` fact is saved as the agent through the checks of
/// [`save`] (size; a new key that is a near-duplicate of a live memory by spelling or, with
/// `embedder`, by meaning updates that memory instead of forking a twin, and says so), and a
/// preference becomes a proposal the user accepts or rejects: the agent never writes
/// `user_preferences`. A fact the rules refuse is dropped. Without `embedder` twins are
/// found by spelling only; the result and the log say so.
/// Database errors stop the run; what is settled stays settled, the rest waits for the
/// next run (saving a fact twice writes the same memory twice).
pub fn settle_memory_updates(
    store: &dyn Backend,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
) -> Result<Settled> {
    let mut settled = Settled::default();
    let mut vectors = TextVectors::default();
    loop {
        let batch = store.pending_updates(SETTLE_BATCH)?;
        if batch.is_empty() {
            return Ok(settled);
        }
        if embedder.is_none()
            && !settled.spelling_only
            && batch.iter().any(|queued| queued.update.category != Category::UserPreferences)
        {
            settled.spelling_only = true;
            tracing::warn!(
                "no embedding model loaded: the summaries' facts are checked for twins of existing \
                 memories by key spelling only"
            );
        }
        for queued in &batch {
            let applied = match settle_one(store, config, embedder, &mut vectors, queued) {
                Ok(applied) => applied,
                Err(Error::Store(error)) if !matches!(error, strata_seam::Error::Invalid { .. }) => {
                    return Err(Error::Store(error));
                }
                Err(refused) => {
                    tracing::info!(key = %queued.update.key, reason = %refused, "memory update dropped");
                    settled.dropped += 1;
                    store.settle_update(queued.id)?;
                    continue;
                }
            };
            match applied {
                Applied::Proposed => settled.proposed += 1,
                Applied::Held => settled.held += 1,
                Applied::Superseded => {
                    settled.superseded += 1;
                    store.settle_update(queued.id)?;
                }
                Applied::Saved { merged } => {
                    settled.saved += 1;
                    settled.merged += usize::from(merged);
                    store.settle_update(queued.id)?;
                }
            }
        }
    }
}

/// What became of one fact the rules accepted.
enum Applied {
    /// `merged`: into an existing memory of another key, a near-duplicate of the fact's.
    Saved {
        merged: bool,
    },
    Proposed,
    /// Kept as a proposal: it would have dropped too much of the memory.
    Held,
    /// The memory's content stopped being true; the fact is what is true now.
    Superseded,
}

/// Applies one fact; an error is a refusal (or a database error, which the caller tells apart).
fn settle_one(
    store: &dyn Backend,
    config: &RecallConfig,
    embedder: Option<&Embedder>,
    vectors: &mut TextVectors,
    queued: &QueuedUpdate,
) -> Result<Applied> {
    let update = &queued.update;
    let title: String = update.title.trim().chars().take(200).collect();
    if update.category == Category::UserPreferences {
        // The store checks the key, title and content as for any memory (`propose`).
        let key = normalize_key(&update.key)
            .ok_or_else(|| Error::invalid("key", format!("{:?} has no letters or digits", update.key)))?;
        let current = store.memory(&queued.persona, Category::UserPreferences, &key)?;
        if current.is_some_and(|memory| memory.content.trim() == update.content.trim()) {
            return Err(Error::invalid("content", "the user's preference says this already"));
        }
        store.propose_preference(queued.id, &key, title.trim(), update.content.trim())?;
        return Ok(Applied::Proposed);
    }
    if let Some(applied) = curate_existing(store, config, queued, &title)? {
        return Ok(applied);
    }
    let mut args = SaveMemoryArgs {
        category: update.category.as_str().to_owned(),
        key: update.key.clone(),
        title,
        content: update.content.clone(),
        allow_new_key: None,
        true_since: None,
    };
    // Consolidated from the node whose summary found it (gone if a forget took it).
    let provenance = queued.node_id.map_or_else(Provenance::unknown, Provenance::summary);
    match save_checked(store, &queued.persona, config, embedder, vectors, &args, &provenance) {
        Ok(_) => Ok(Applied::Saved { merged: false }),
        Err(Error::NearDuplicateKey { key, existing_key, existing_category, likeness })
            if existing_category != Category::UserPreferences =>
        {
            // The fact is news about a memory the persona has: update that one, under its own
            // key and title (the label its readers know), and record which key the summary
            // proposed, so `memory history` shows why this version came from there.
            tracing::info!(
                persona = %queued.persona,
                proposed = %key,
                existing = %existing_key,
                %likeness,
                "a summary's fact is a near-duplicate of an existing memory: updating it"
            );
            let proposed_title = args.title.clone();
            if let Some(existing) = store.memory(&queued.persona, existing_category, &existing_key)? {
                args.title = existing.title;
            }
            args.category = existing_category.as_str().to_owned();
            args.key = existing_key;
            let merged = Provenance { via: Some("summary facts".to_owned()), ..provenance }.merged_into_twin(
                &key,
                &proposed_title,
                likeness,
            );
            save_checked(store, &queued.persona, config, embedder, vectors, &args, &merged)
                .map(|_| Applied::Saved { merged: true })
        }
        Err(error) => Err(error),
    }
}

/// A fact about a memory the persona has under its key, checked before it is written: a
/// supersede dates the old content and replaces it; an update that drops more than
/// `max_dropped_share` of the memory's words is held as a proposal for the user. `None` when
/// the fact goes the usual way (a new key, or an update that keeps enough).
fn curate_existing(
    store: &dyn Backend,
    config: &RecallConfig,
    queued: &QueuedUpdate,
    title: &str,
) -> Result<Option<Applied>> {
    let update = &queued.update;
    let Some(key) = normalize_key(&update.key) else { return Ok(None) };
    let now = Utc::now();
    let Some(current) =
        store.memory(&queued.persona, update.category, &key)?.filter(|memory| !memory.ended_by(now))
    else {
        return Ok(None);
    };
    let content = config.secret_patterns.mask(update.content.trim()).into_owned();
    let title = match title.trim() {
        "" => current.title.clone(),
        title => config.secret_patterns.mask(title).into_owned(),
    };
    if update.edit == Some(Edit::Supersede) {
        // The old content stopped being true when the messages that say so were written: the
        // end of the summarized span, kept within what the memory's dates allow.
        let said = match queued.node_id {
            Some(node) => store.node(node).map(|node| node.end_time).unwrap_or(now),
            None => now,
        };
        let at = said.min(now).max(current.valid_from);
        let write = MemoryWrite { category: update.category, key: &key, title: &title, content: &content };
        let provenance = queued.node_id.map_or_else(Provenance::unknown, Provenance::summary);
        store.supersede_memory(
            Writer::Agent,
            &queued.persona,
            update.category,
            &key,
            Some(&write),
            at,
            &provenance,
        )?;
        return Ok(Some(Applied::Superseded));
    }
    let dropped = curate::dropped_share(&current.content, &content);
    if dropped <= config.max_dropped_share {
        return Ok(None);
    }
    tracing::info!(
        persona = %queued.persona,
        key = %key,
        dropped = format!("{:.0}%", dropped * 100.0),
        "an update would drop much of a memory without superseding it: kept as a proposal"
    );
    store.propose_preference(queued.id, &key, &title, &content)?;
    Ok(Some(Applied::Held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_closeness() {
        let config = RecallConfig::default();
        assert!(closeness(&config, "deploy_steps", "deploy_step").is_some());
        assert!(closeness(&config, "user_timezone", "timezone_user").is_some());
        assert!(closeness(&config, "cpu", "gpu").is_none());
        assert!(closeness(&config, "editor", "database_url").is_none());
    }

    #[test]
    fn scripts_and_meaning_texts() {
        assert!(mostly_cjk("标日学习", "标日学习进度"));
        assert!(mostly_cjk("标日学习", "标日 (Standard Japanese) 学习进度"), "6 characters against 2 words");
        assert!(mostly_cjk("にほんご", ""));
        assert!(!mostly_cjk("standard_japanese", "Standard Japanese (标日) textbook"));
        assert!(!mostly_cjk("", ""));
        assert_eq!(script_of("изучение_испанского", "Испанский"), Script::Cyrillic);
        assert_eq!(script_of("spanish_study", "Испанский (Aula 2)"), Script::Latin, "2 words against 1");
        assert_eq!(script_of("한국어_공부", ""), Script::Cjk);
        assert_eq!(script_of("μαθήματα_ελληνικών", "Μαθήματα"), Script::Greek);
        assert_eq!(script_of("μαθήματα_ελληνικών", "Greek lessons"), Script::Latin, "a tie is Latin");
        assert_eq!(script_of("", ""), Script::Latin);
        assert_eq!(meaning_text("user_timezone", "User Timezone", " "), "user timezone");
        assert_eq!(meaning_text("user_timezone", "TZ", "UTC+2"), "user timezone: TZ. UTC+2");
    }
}
