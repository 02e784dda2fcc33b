//! Facts the offline summarizer can find without a model: what a person asked in so many words
//! to be remembered ("remember that …") and the preferences they stated ("from now on …",
//! "I prefer …"), in English, German, Spanish, French, Chinese and Japanese. Anything subtler is
//! left to an LLM summarizer; the list is empty otherwise.

use strata_seam::memories::{MAX_CONTENT_CHARS, MAX_KEY_CHARS, MemoryUpdate, normalize_key};
use strata_seam::search::STOPWORDS;
use strata_seam::{Category, Role};

use crate::summarizer::{MAX_MEMORY_UPDATES, SourceItem, truncate_chars};

/// Where the fact stands beside its cue.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    /// The fact follows the cue ("from now on, answer in French").
    After,
    /// The fact follows the cue, which must open the sentence: 以后 alone also means "later"
    /// in the middle of one ("我们以后再聊").
    Opening,
    /// The fact precedes the cue, which ends the sentence but for a copula (辛いものが好きです).
    Before,
}

/// A phrase that marks a statement, and what the statement becomes. Matched on the lowercased
/// sentence; a cue in a spaced script must start a word and carries its trailing space or
/// comma, a CJK cue may be glued to its neighbours.
struct Cue {
    phrase: &'static str,
    category: Category,
    place: Place,
}

const fn memo(phrase: &'static str) -> Cue {
    Cue { phrase, category: Category::Memo, place: Place::After }
}

const fn prefers(phrase: &'static str) -> Cue {
    Cue { phrase, category: Category::UserPreferences, place: Place::After }
}

const fn opening(phrase: &'static str) -> Cue {
    Cue { phrase, category: Category::UserPreferences, place: Place::Opening }
}

const fn prefers_before(phrase: &'static str) -> Cue {
    Cue { phrase, category: Category::UserPreferences, place: Place::Before }
}

// One table per language; within one, a longer cue comes before a cue it contains.
const ENGLISH: &[Cue] = &[
    memo("please remember that "),
    memo("remember that "),
    prefers("from now on, "),
    prefers("from now on "),
    prefers("i'd prefer "),
    prefers("i would prefer "),
    prefers("i prefer "),
];

const GERMAN: &[Cue] = &[
    memo("merk dir, dass "),
    memo("merke dir, dass "),
    memo("merk dir: "),
    memo("merk dir "),
    memo("merke dir "),
    prefers("ab jetzt, "),
    prefers("ab jetzt "),
    prefers("ab sofort, "),
    prefers("ab sofort "),
    prefers("von nun an, "),
    prefers("von nun an "),
    prefers("ich bevorzuge "),
    prefers("mir ist lieber, wenn "),
    prefers("mir ist lieber, "),
    prefers("mir ist lieber "),
];

const SPANISH: &[Cue] = &[
    memo("recuerda que "),
    memo("acuérdate de que "),
    prefers("a partir de ahora, "),
    prefers("a partir de ahora "),
    prefers("de ahora en adelante, "),
    prefers("de ahora en adelante "),
    prefers("prefiero que "),
    prefers("prefiero "),
];

const FRENCH: &[Cue] = &[
    memo("souviens-toi que "),
    memo("souviens-toi qu'"),
    memo("souviens-toi qu\u{2019}"),
    memo("rappelle-toi que "),
    memo("retiens que "),
    prefers("à partir de maintenant, "),
    prefers("à partir de maintenant "),
    prefers("désormais, "),
    prefers("désormais "),
    prefers("dorénavant, "),
    prefers("dorénavant "),
    prefers("je préfère que "),
    prefers("je préfère "),
];

const CHINESE: &[Cue] = &[
    memo("请记住"),
    memo("记住"),
    prefers("从现在开始"),
    prefers("从今以后"),
    opening("以后请"),
    opening("以后都"),
    opening("以后"),
    opening("今后"),
    prefers("我更喜欢"),
    prefers("我比较喜欢"),
    prefers("我喜欢"),
    prefers("我偏好"),
];

const JAPANESE: &[Cue] = &[
    memo("覚えておいてください"),
    memo("覚えておいて"),
    prefers("今後は"),
    prefers("これからは"),
    prefers_before("の方がいい"),
    prefers_before("のほうがいい"),
    prefers_before("の方が好き"),
    prefers_before("が好き"),
];

const LANGUAGES: &[&[Cue]] = &[ENGLISH, GERMAN, SPANISH, FRENCH, CHINESE, JAPANESE];

/// What may follow a [`Place::Before`] cue: a copula, nothing else (が好きではない denies it).
const COPULAS: &[&str] = &["", "です", "だ", "だよ", "ですね", "なんです", "なんだ"];
/// Whose preference a Japanese sentence opens with: the speaker's, left out of the fact.
const FIRST_PERSON_TOPICS: &[&str] = &["私は", "わたしは", "僕は", "俺は"];

/// Characters of a title.
const TITLE_CHARS: usize = 80;
/// Content words a key is made of.
const KEY_WORDS: usize = 4;
/// Characters of an unspaced script counted as one word of a key.
const CJK_CHARS_PER_WORD: usize = 2;

/// The facts stated in so many words in the people's messages of a chunk, oldest first; a later
/// statement of the same key replaces an earlier one.
pub(crate) fn stated(items: &[SourceItem]) -> Vec<MemoryUpdate> {
    let mut found: Vec<MemoryUpdate> = Vec::new();
    for item in items.iter().filter(|item| item.origin.is(Role::User)) {
        for update in stated_facts(&item.text, item.name.as_deref()) {
            found.retain(|earlier| earlier.key != update.key);
            found.push(update);
        }
    }
    // The newest statements matter most when there are too many.
    let excess = found.len().saturating_sub(MAX_MEMORY_UPDATES);
    found.drain(..excess);
    found
}

/// The facts a person's message states in so many words, in its order: what the offline
/// summarizer finds in it, and what an engine proposes as soon as the message is appended.
/// `speaker` is the person's name, if the message carries one.
pub fn stated_facts(text: &str, speaker: Option<&str>) -> Vec<MemoryUpdate> {
    sentences(text).filter_map(|sentence| statement(sentence, speaker)).collect()
}

/// The fact of one sentence, if it holds a cue with something to keep beside it. A question
/// states nothing ("我喜欢什么？", "猫が好きですか？").
fn statement(sentence: &str, speaker: Option<&str>) -> Option<MemoryUpdate> {
    if sentence.ends_with(['?', '？']) {
        return None;
    }
    let lower = sentence.to_lowercase();
    // `to_lowercase` can change lengths outside ASCII: cut the original only where it lines up.
    let source = if lower.len() == sentence.len() { sentence } else { lower.as_str() };
    let (category, fact) = LANGUAGES
        .iter()
        .flat_map(|cues| cues.iter())
        .find_map(|cue| Some((cue.category, fact_of(cue, &lower, source)?)))?;
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

/// The text a cue marks as the fact in `source` (the sentence, or its lowercase when the two
/// differ in length), found at the cue's first fitting place in `lower`.
fn fact_of<'a>(cue: &Cue, lower: &str, source: &'a str) -> Option<&'a str> {
    let glued = cue.phrase.starts_with(is_unspaced);
    let at = lower.match_indices(cue.phrase).map(|(at, _)| at).find(|&at| glued || starts_word(lower, at))?;
    let after = &source[at + cue.phrase.len()..];
    let fact = match cue.place {
        Place::After => after,
        Place::Opening if at == 0 => after,
        Place::Opening => return None,
        Place::Before => {
            if !COPULAS.contains(&trim_fact(after)) {
                return None;
            }
            let before = trim_fact(&source[..at]);
            FIRST_PERSON_TOPICS.iter().find_map(|topic| before.strip_prefix(topic)).unwrap_or(before)
        }
    };
    let fact = trim_fact(fact);
    (!fact.is_empty()).then_some(fact)
}

/// The fact without the spaces and punctuation around it.
fn trim_fact(text: &str) -> &str {
    const AROUND: &[char] = &[',', ':', ';', '.', '!', '，', '：', '；', '、', '。', '！'];
    text.trim_matches(|c: char| c.is_whitespace() || AROUND.contains(&c))
}

fn starts_word(text: &str, at: usize) -> bool {
    text[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
}

/// Letters of the scripts written without spaces between words: Han, kana and Hangul.
fn is_unspaced(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}' // hiragana and katakana
        | '\u{3400}'..='\u{4DBF}' // Han, extension A
        | '\u{4E00}'..='\u{9FFF}' // Han
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}' // Han compatibility ideographs
        | '\u{20000}'..='\u{2FA1F}' // Han, extensions B and on
    )
}

/// A key from the first content words of the fact; `None` when it has fewer than two (a fact
/// of "it" or "that" is not worth a memory). A run of an unspaced script has no words to split
/// on: every two of its characters count as one word, so 用中文回答 keys as `用中文回答` and
/// 中文 alone is too little.
fn key_of(fact: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    let mut counted = 0;
    let content_words = fact
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| !STOPWORDS.contains(&word.as_str()));
    for word in content_words {
        if counted >= KEY_WORDS {
            break;
        }
        if !word.contains(is_unspaced) {
            counted += 1;
            words.push(word);
            continue;
        }
        let kept: String = word.chars().take((KEY_WORDS - counted) * CJK_CHARS_PER_WORD).collect();
        counted += kept.chars().count().div_ceil(CJK_CHARS_PER_WORD);
        words.push(kept);
    }
    if counted < 2 {
        return None;
    }
    let key = normalize_key(&words.join(" "))?;
    Some(key.chars().take(MAX_KEY_CHARS).collect::<String>().trim_end_matches('_').to_owned())
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// Sentences: cut after `.`, `!` or `?` followed by white space, after `。`, `！` or `？`
/// (which need none), and at line breaks.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').flat_map(|line| {
        let mut pieces = Vec::new();
        let mut start = 0;
        let bytes = line.as_bytes();
        for (at, c) in line.char_indices() {
            let end = at + c.len_utf8();
            let ends = match c {
                '.' | '!' | '?' => bytes.get(end).is_some_and(u8::is_ascii_whitespace),
                '。' | '！' | '？' => true,
                _ => false,
            };
            if ends {
                pieces.push(&line[start..end]);
                start = end;
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
    /// The one fact a user's sentence states, as (category, key, content).
    fn one(text: &str) -> (Category, String, String) {
        let facts = stated_facts(text, None);
        assert_eq!(facts.len(), 1, "{text}: {facts:#?}");
        let fact = facts.into_iter().next().unwrap();
        assert_eq!(normalize_key(&fact.key).as_deref(), Some(fact.key.as_str()), "{fact:?}");
        (fact.category, fact.key, fact.content)
    }

    fn none(text: &str) {
        assert_eq!(stated_facts(text, None), Vec::new(), "{text}");
    }

    #[test]
    fn german_statements_and_german_chat() {
        let (category, key, content) = one("Ab jetzt antworte bitte auf Deutsch.");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "antworte_bitte_auf_deutsch"));
        assert_eq!(content, "Prefers: antworte bitte auf Deutsch");
        assert_eq!(one("Von nun an, kurze Antworten ohne Emojis!").0, Category::UserPreferences);
        assert_eq!(
            one("Mir ist lieber, wenn du Tabs statt Leerzeichen nimmst.").1,
            "du_tabs_statt_leerzeichen"
        );
        let (category, key, _) = one("Merk dir, dass der Server auf Port 5433 läuft.");
        assert_eq!((category, key.as_str()), (Category::Memo, "der_server_auf_port"));
        none("Ich habe mir nicht gemerkt, was du bevorzugst. Abjetzt ist kein Wort.");
    }

    #[test]
    fn spanish_statements_and_spanish_chat() {
        let (category, key, _) = one("¡A partir de ahora, responde en español!");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "responde_en_español"));
        assert_eq!(one("Prefiero respuestas cortas sin emojis.").1, "respuestas_cortas_sin_emojis");
        let (category, key, _) = one("Recuerda que la reunión es los lunes.");
        assert_eq!((category, key.as_str()), (Category::Memo, "la_reunión_es_los"));
        none("No recuerdo que dijiste. ¿Prefieres té o café? Yo prefiero.");
    }

    #[test]
    fn french_statements_and_french_chat() {
        let (category, key, content) = one("Désormais, réponds en français.");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "réponds_en_français"));
        assert_eq!(content, "Prefers: réponds en français");
        assert_eq!(one("À partir de maintenant utilise des tabulations.").1, "utilise_des_tabulations");
        assert_eq!(one("Je préfère les réponses courtes.").1, "les_réponses_courtes");
        let (category, key, _) = one("Souviens-toi qu'Alice est en vacances demain.");
        assert_eq!((category, key.as_str()), (Category::Memo, "alice_est_en_vacances"));
        none("Je ne sais pas ce que je préfère. Tu te souviens de moi ?");
    }

    #[test]
    fn chinese_statements_and_chinese_chat() {
        let (category, key, content) = one("以后请用中文回答。");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "用中文回答"));
        assert_eq!(content, "Prefers: 用中文回答");
        let (category, key, _) = one("从现在开始，回答要简短");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "回答要简短"));
        // No space ends the sentence: the next one is not part of the fact.
        let facts = stated_facts("我更喜欢简短的回答！请记住我的生日是五月三日。", None);
        assert_eq!(facts.len(), 2, "{facts:#?}");
        assert_eq!((facts[0].category, facts[0].key.as_str()), (Category::UserPreferences, "简短的回答"));
        assert_eq!((facts[1].category, facts[1].key.as_str()), (Category::Memo, "我的生日是五月三"));
        none("我们以后再聊这个话题。你知道我喜欢什么吗？我记不住。");
    }

    #[test]
    fn japanese_statements_and_japanese_chat() {
        let (category, key, content) = one("今後は日本語で答えてください。");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "日本語で答えてく"));
        assert_eq!(content, "Prefers: 日本語で答えてください");
        let (category, key, content) = one("私は短い答えの方がいいです。");
        assert_eq!((category, key.as_str()), (Category::UserPreferences, "短い答え"));
        assert_eq!(content, "Prefers: 短い答え");
        assert_eq!(one("辛い料理が好きです").1, "辛い料理");
        let (category, key, _) = one("覚えておいてください：会議は月曜日です。");
        assert_eq!((category, key.as_str()), (Category::Memo, "会議は月曜日です"));
        none("猫が好きですか？犬が好きではない。好きな色は青。");
    }

    #[test]
    fn a_single_word_in_any_script_is_too_little_for_a_key() {
        none("以后中文。");
        none("Désormais oui.");
        none("覚えておいて。");
    }
}
