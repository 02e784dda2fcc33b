//! Text segmentation: sentences, clauses, word tokens, paths, code, and the generic English
//! word lists that tell content from function words and filler.

use std::collections::HashSet;
use std::sync::LazyLock;

use chrono::{Datelike, NaiveDate};

use crate::summarizer::{SourceItem, one_line_within, truncate_chars};

/// Function words beyond the store's list ([`strata_seam::search::STOPWORDS`], the one list of common
/// English function words) that carry no fact of their own either: contractions' stems,
/// reflexives and a few adverbs and prepositions.
pub(super) const MORE_FUNCTION_WORDS: &[&str] = &[
    "above",
    "against",
    "because",
    "below",
    "between",
    "down",
    "during",
    "each",
    "few",
    "further",
    "herself",
    "himself",
    "itself",
    "more",
    "most",
    "myself",
    "now",
    "ourselves",
    "themselves",
    "yourself",
    "yourselves",
    "s",
    "t",
    "d",
    "ll",
    "m",
    "re",
    "ve",
    "don",
    "didn",
    "doesn",
    "isn",
    "wasn",
    "aren",
    "won",
    "can't",
    "also",
    "let",
    "us",
    "yet",
    "still",
    "even",
    "ever",
    "via",
    "per",
    "etc",
    "hasn",
    "haven",
    "hadn",
    "couldn",
    "wouldn",
    "shouldn",
    "weren",
    "mustn",
    "needn",
    "ain",
    "em",
    "since",
    "though",
    "although",
    "whether",
    "within",
    "upon",
    "onto",
    "across",
    "along",
    "around",
    "among",
    "toward",
    "towards",
    "unless",
    "whose",
];

/// Words of conversation that carry no fact: greetings, thanks, reactions, hedges and
/// intensifiers. A generic list of spoken English, not of any one conversation.
pub(super) const FILLER: &[&str] = &[
    "hey",
    "hi",
    "hello",
    "bye",
    "goodbye",
    "wow",
    "oh",
    "ah",
    "aw",
    "aww",
    "awww",
    "ooh",
    "haha",
    "hahaha",
    "lol",
    "omg",
    "yeah",
    "yes",
    "yep",
    "yup",
    "nope",
    "ok",
    "okay",
    "sure",
    "cool",
    "awesome",
    "great",
    "nice",
    "amazing",
    "wonderful",
    "fantastic",
    "incredible",
    "lovely",
    "beautiful",
    "thanks",
    "thank",
    "thx",
    "glad",
    "hope",
    "hopefully",
    "really",
    "totally",
    "definitely",
    "absolutely",
    "super",
    "pretty",
    "quite",
    "literally",
    "actually",
    "basically",
    "honestly",
    "maybe",
    "perhaps",
    "probably",
    "lot",
    "lots",
    "stuff",
    "thing",
    "things",
    "good",
    "well",
    "right",
    "sorry",
    "please",
    "congrats",
    "congratulations",
    "cheers",
    "dear",
    "guess",
    "mean",
    "means",
    "kind",
    "sort",
    "bit",
    "sounds",
    "sound",
    "seems",
    "seem",
    "feel",
    "feels",
    "felt",
    "think",
    "thought",
    "know",
    "knew",
    "like",
    "love",
    "loved",
    "glad",
    "excited",
    "happy",
    "cute",
    "fun",
    "true",
    "exactly",
    "indeed",
    "anyway",
    "anyways",
    "much",
    "many",
    "way",
    "something",
    "anything",
    "everything",
    "nothing",
    "someone",
    "anyone",
    "everyone",
    "got",
    "get",
    "gets",
    "getting",
    "going",
    "go",
    "make",
    "makes",
    "made",
    "take",
    "takes",
    "keep",
    "keeps",
    "see",
    "say",
    "said",
    "tell",
    "told",
    "want",
    "wanted",
    "need",
    "needs",
    "look",
    "looks",
    "looking",
    "talk",
    "chat",
    "yours",
    "totally",
    "agree",
    "awesome",
    "gonna",
    "wanna",
    "gotta",
    "kinda",
    "sorta",
    "nah",
    "yea",
    "btw",
    "fyi",
    "lemme",
    "dunno",
    "lately",
];

/// Words that mark a decision taken or a plan made.
pub(super) const DECISION_MARKERS: &[&str] = &[
    "decided",
    "decision",
    "agreed",
    "going with",
    "go with",
    "chose",
    "settled on",
    "switch to",
    "switched to",
    "will use",
    "plan is",
    "planning to",
    "from now on",
];

/// Words that propose rather than decide: a unit holding them is listed under decisions when
/// picked for its content, but is not favoured for it.
pub(super) const PROPOSAL_MARKERS: &[&str] = &["we'll", "we will", "let's", "let us"];

/// First words of a sentence that only react ("Wow, ...", "Oh, ..."): trimmed before quoting.
pub(super) const INTERJECTIONS: &[&str] = &[
    "hey", "hi", "hello", "wow", "oh", "ah", "aw", "aww", "ooh", "haha", "lol", "omg", "yeah", "yes", "yep",
    "ok", "okay", "sure", "well", "so", "anyway", "thanks", "cool", "great", "nice", "awesome",
];

pub(super) const FILE_EXTENSIONS: &[&str] = &[
    "rs",
    "toml",
    "py",
    "js",
    "ts",
    "tsx",
    "jsx",
    "go",
    "java",
    "c",
    "h",
    "cpp",
    "hpp",
    "cs",
    "rb",
    "php",
    "sh",
    "md",
    "txt",
    "json",
    "yaml",
    "yml",
    "sql",
    "html",
    "css",
    "lock",
    "cfg",
    "ini",
    "conf",
    "log",
    "csv",
    "xml",
    "proto",
    "kt",
    "swift",
    "dockerfile",
    "env",
    "db",
    "pdf",
    "png",
    "jpg",
    "svg",
];

/// The function words ([`strata_seam::search::STOPWORDS`], [`MORE_FUNCTION_WORDS`]) and [`FILLER`] as
/// one set: words that are never a fact.
pub(super) static NOT_CONTENT: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    strata_seam::search::STOPWORDS.iter().chain(MORE_FUNCTION_WORDS).chain(FILLER).copied().collect()
});

pub(super) fn is_content(lower: &str) -> bool {
    !NOT_CONTENT.contains(lower)
}

/// Who said it: the message's `name`, else its role.
pub(super) fn speaker_of(item: &SourceItem) -> String {
    item.name
        .clone()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| item.origin.as_str().to_owned())
}

/// A leading `YYYY-MM-DD ` on a body line, or `MM-DD ` in the year of `current`.
pub(super) fn split_date(text: &str, current: NaiveDate) -> (Option<NaiveDate>, &str) {
    let Some((date, rest)) = text.split_once(' ') else { return (None, text) };
    let day = match date.len() {
        10 => NaiveDate::parse_from_str(date, "%Y-%m-%d").ok(),
        5 => NaiveDate::parse_from_str(&format!("{}-{date}", current.year()), "%Y-%m-%d").ok(),
        _ => None,
    };
    match day {
        Some(day) => (Some(day), rest),
        None => (None, text),
    }
}

/// A leading `Speaker: ` on a body line: at most three words before the colon, no digits.
pub(super) fn split_speaker(text: &str) -> (Option<&str>, &str) {
    if let Some((who, rest)) = text.split_once(": ") {
        let plausible = !who.is_empty()
            && who.len() <= 40
            && who.split_whitespace().count() <= 3
            && who.chars().all(|c| c.is_alphabetic() || matches!(c, ' ' | '-' | '_' | '.' | '\''));
        if plausible {
            return (Some(who), rest);
        }
    }
    (None, text)
}

/// The people prefix of a headline this summarizer wrote (`Ines, Rui — `), and the rest.
pub(super) fn split_people(headline: &str) -> (&str, &str) {
    match headline.split_once(PEOPLE_SEPARATOR) {
        Some((people, rest))
            if people
                .split(", ")
                .all(|name| name.split_whitespace().count() <= 2 && name.starts_with(char::is_uppercase)) =>
        {
            (people, rest)
        }
        _ => ("", headline),
    }
}

/// Between the people of a headline and what happened.
pub(super) const PEOPLE_SEPARATOR: &str = " — ";

/// The clauses of a headline this summarizer wrote: after the people, separated by `; `.
pub(super) fn headline_clauses(headline: &str) -> Vec<String> {
    let headline = headline.strip_prefix("[raw archive] ").unwrap_or(headline);
    split_people(headline)
        .1
        .split("; ")
        .map(|clause| clause.trim().trim_end_matches(['.', '…', ' ']).to_owned())
        .filter(|clause| clause.chars().any(char::is_alphanumeric))
        .collect()
}

/// Ways of asking that open a request ("Can you look at the logs" -> "look at the logs"):
/// generic English, dropped from headline quotes.
const REQUEST_OPENERS: &[&str] = &[
    "i'd like you to",
    "i would like you to",
    "i want you to",
    "i need you to",
    "can you please",
    "could you please",
    "can you",
    "could you",
    "would you",
    "please",
    "go ahead and",
];

/// The text without the request opener it starts with, if any.
pub(super) fn trim_request_opener(text: &str) -> &str {
    let lower = text.to_lowercase();
    for opener in REQUEST_OPENERS {
        if lower.starts_with(opener) && text.is_char_boundary(opener.len()) {
            let rest = text[opener.len()..].trim_start_matches([',', ' ']);
            if rest.chars().any(char::is_alphanumeric) {
                return rest;
            }
        }
    }
    text
}

/// Runs of consecutive content words in a text (broken by stop words, filler and punctuation),
/// with or without the content of bracketed annotations (`[shares image: a photo of a dog]`).
pub(super) fn content_runs(text: &str, annotations: bool) -> Vec<Vec<&str>> {
    let mut runs = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    // The label of an annotation (`[shares image: ...]`, `[calls read_file: ...]`) is a format,
    // not a topic; what follows its colon is content.
    let mut label = false;
    let mut annotation = false;
    for raw in text.split_whitespace() {
        if raw.starts_with('[') && !raw.ends_with(']') {
            label = true;
            annotation = true;
        }
        let skip = label || annotation && !annotations;
        if raw.ends_with(']') {
            annotation = false;
        }
        if skip {
            if raw.ends_with(':') || raw.ends_with(']') {
                label = false;
            }
            if !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
            continue;
        }
        let word = trim_token(raw);
        let lower = word.to_lowercase();
        let content = !word.is_empty()
            && word.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '\'' | '+'))
            && word.chars().any(char::is_alphanumeric)
            && (lower.chars().count() >= 2 || lower.chars().all(|c| c.is_ascii_digit()))
            && is_content(&lower);
        if content {
            run.push(word);
        }
        // Punctuation after a word ends its phrase.
        let ends = raw.ends_with([',', '.', ';', ':', '!', '?', ')', '"']);
        if (!content || ends) && !run.is_empty() {
            runs.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}

/// Drops the comma, semicolon or dash a clause ended with when nothing follows it.
pub(super) fn trim_clause_end(text: &mut String) {
    let trimmed = text.trim_end_matches([',', ';', '–', '—', '-', ' ']).len();
    text.truncate(trimmed);
}

pub(super) fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The sentence without the reactions it opens with ("Wow, that's cool" -> "that's cool").
pub(super) fn trim_interjections(text: &str) -> &str {
    let mut rest = text.trim();
    loop {
        let Some((first, after)) = rest.split_once(char::is_whitespace) else { return rest };
        let word = first.trim_end_matches([',', '!', '.']);
        let punctuated = first.len() != word.len();
        if punctuated && INTERJECTIONS.contains(&word.to_lowercase().as_str()) {
            rest = after.trim_start();
        } else {
            return rest;
        }
    }
}

/// Words that only intensify ("really important", "so proud", "I just joined"): dropped from
/// quotes before another word, which keeps their meaning and saves tokens for facts.
pub(super) const INTENSIFIERS: &[&str] = &[
    "really",
    "very",
    "super",
    "so",
    "just",
    "totally",
    "actually",
    "literally",
    "definitely",
    "absolutely",
    "basically",
    "truly",
    "extremely",
    "incredibly",
    "seriously",
];

/// Hedges and discourse markers of spoken English ("I think", "you know", "kind of"): they say
/// how sure the speaker is or hold the floor, never a fact. Dropped from quotes with the comma
/// that may follow them.
pub(super) const HEDGES: &[&[&str]] = &[
    &["i", "think"],
    &["i", "guess"],
    &["i", "mean"],
    &["i", "feel", "like"],
    &["you", "know"],
    &["kind", "of"],
    &["sort", "of"],
    &["to", "be", "honest"],
];

/// The text without intensifiers before another word and without hedges: a quote says the
/// same in fewer tokens.
pub(super) fn compress_quote(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    // Compared without a new string per word: quoting runs on every unit of every chunk.
    let is = |word: &str, listed: &str| word.trim_end_matches(',').eq_ignore_ascii_case(listed);
    let mut kept: Vec<&str> = Vec::with_capacity(words.len());
    let mut capitalize_next = false;
    let mut index = 0;
    while index < words.len() {
        let word = words[index];
        let before_word = words.get(index + 1).is_some_and(|next| next.starts_with(char::is_alphanumeric));
        let hedge = HEDGES.iter().find(|hedge| {
            index + hedge.len() < words.len()
                && hedge.iter().enumerate().all(|(offset, part)| {
                    let word = words[index + offset];
                    // Only the hedge's last word may carry a comma: "I think, so" is not a hedge.
                    (offset + 1 == hedge.len() || !word.ends_with(',')) && is(word, part)
                })
        });
        let skip = match hedge {
            Some(hedge) => hedge.len(),
            None if before_word
                && !word.ends_with(',')
                && INTENSIFIERS.iter().any(|listed| is(word, listed)) =>
            {
                1
            }
            None => 0,
        };
        if skip == 0 {
            kept.push(word);
            index += 1;
            continue;
        }
        // A sentence that opened with what was dropped opens with a capital still.
        if kept.is_empty() && word.starts_with(char::is_uppercase) {
            capitalize_next = true;
        }
        index += skip;
    }
    let text = kept.join(" ");
    if capitalize_next { capitalize(&text) } else { text }
}

/// `text` on one line, cut at a word boundary to at most `max` characters.
pub(super) fn truncate_words(text: &str, max: usize) -> String {
    // One pass: the line so far, its length in characters, and the end of the longest run of
    // whole words that leaves room for " …".
    let mut line = String::with_capacity(text.len().min(max.saturating_mul(4)));
    let mut chars = 0;
    let mut fitting = true;
    let mut fit_end = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if fitting && chars + len + 2 <= max {
            fit_end = line.len() + usize::from(!line.is_empty()) + word.len();
        } else {
            fitting = false;
        }
        if !line.is_empty() {
            line.push(' ');
            chars += 1;
        }
        line.push_str(word);
        chars += len;
        if !fitting && chars > max {
            break;
        }
    }
    if chars <= max {
        return line;
    }
    if fit_end == 0 {
        return truncate_chars(&line, max);
    }
    // A text cut before (ending in "…") is not marked twice.
    format!("{} …", line[..fit_end].trim_end_matches([',', ';', ':', ' ', '…']))
}

/// The first sentence of a text, on one line.
pub(super) fn first_sentence(text: &str, max_chars: usize) -> String {
    sentences(text).next().map(|s| one_line_within(s, max_chars)).unwrap_or_default()
}

/// Sentences and lines of a text: split at line breaks and at `.`, `!`, `?` followed by a space.
pub(super) fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').flat_map(|line| {
        let mut parts = Vec::new();
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_some_and(|n| *n == b' ') {
                parts.push(&line[start..=i]);
                start = i + 1;
            }
        }
        parts.push(&line[start..]);
        parts.into_iter().map(str::trim).filter(|s| s.chars().any(char::is_alphanumeric))
    })
}

/// A sentence cut into clauses, so a selection can keep the part that carries the fact: at
/// `; ` and spaced dashes always, at `, ` when both sides have a few words. Each clause keeps
/// its trailing punctuation; the pieces concatenate back to the sentence.
pub(super) fn clauses(sentence: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let bytes = sentence.as_bytes();
    let words_in = |text: &str| text.split_whitespace().count();
    for (i, c) in sentence.char_indices() {
        let cut = match c {
            ';' => bytes.get(i + 1) == Some(&b' '),
            ',' => {
                bytes.get(i + 1) == Some(&b' ')
                    && words_in(&sentence[start..i]) >= 6
                    && words_in(&sentence[i + 1..]) >= 4
            }
            '–' | '—' | '-' => {
                i > 0 && bytes[i - 1] == b' ' && sentence[i + c.len_utf8()..].starts_with(' ')
            }
            _ => false,
        };
        if cut && i > start {
            let end = i + c.len_utf8();
            pieces.push(sentence[start..end].trim());
            start = end;
        }
    }
    pieces.push(sentence[start..].trim());
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// True for a line of code or machine output rather than prose, judged by its symbols: prose
/// has few brackets, operators and semicolons per word.
pub(super) fn looks_like_code(text: &str) -> bool {
    let mut symbols = 0usize;
    let mut visible = 0usize;
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        visible += 1;
        if matches!(
            c,
            '{' | '}'
                | '['
                | ']'
                | '('
                | ')'
                | '<'
                | '>'
                | ';'
                | '='
                | '&'
                | '|'
                | '*'
                | '#'
                | '$'
                | '\\'
                | '`'
                | '^'
                | '~'
        ) {
            symbols += 1;
        }
    }
    visible > 0 && (symbols as f64 / visible as f64 > 0.06 || text.trim_end().ends_with(['{', ';']))
}

pub(super) fn trim_token(word: &str) -> &str {
    word.trim_matches(|c: char| {
        matches!(
            c,
            '.' | ','
                | ';'
                | ':'
                | ')'
                | '('
                | '['
                | ']'
                | '{'
                | '}'
                | '"'
                | '\''
                | '`'
                | '<'
                | '>'
                | '!'
                | '?'
                | '*'
        )
    })
}

/// True for words that look like a file or directory path (or a URL).
pub(super) fn is_path(word: &str) -> bool {
    if word.len() < 3 || word.len() > 200 || !word.chars().any(char::is_alphabetic) {
        return false;
    }
    if word.contains("://") {
        return true;
    }
    if word.contains('/') {
        // `and/or`, `1/2` and dates are not paths: a path has a dotted name or several segments.
        let segments = word.split('/').filter(|s| !s.is_empty()).count();
        return segments >= 2
            && (word.contains('.') || segments >= 3 || word.starts_with('/') || word.starts_with("~/"))
            || word.ends_with('/') && segments >= 1;
    }
    match word.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && stem.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
                && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reactions_are_trimmed_and_sentences_cut_at_clauses() {
        assert_eq!(trim_interjections("Wow, okay, the lease ends in June."), "the lease ends in June.");
        assert_eq!(trim_interjections("Well-known bug."), "Well-known bug.");
        let sentence =
            "I finally took the kids to the pottery workshop last Friday, we all made pots – it was fun.";
        let pieces = clauses(sentence);
        assert_eq!(
            pieces,
            [
                "I finally took the kids to the pottery workshop last Friday,",
                "we all made pots –",
                "it was fun."
            ]
        );
        // Short comma clauses stay together.
        assert_eq!(clauses("Yes, it was fun."), ["Yes, it was fun."]);
        assert_eq!(compress_quote("It is really important, really."), "It is important, really.");
        assert_eq!(compress_quote("a  Very  b"), "a  Very  b", "spacing is kept");
        assert_eq!(
            compress_quote("I think I'm kind of ready, you know, so proud of it"),
            "I'm ready, proud of it",
            "the comma before a dropped hedge stays, the hedge and its comma go"
        );
        assert_eq!(compress_quote("I think the lease ends in June."), "The lease ends in June.");
        assert_eq!(compress_quote("So, I think."), "So, I think.", "a hedge at the end says something");
    }

    #[test]
    fn words_are_cut_whole_on_one_line() {
        assert_eq!(truncate_words("  short\n line ", 40), "short line");
        assert_eq!(truncate_words("one two three four", 18), "one two three four");
        assert_eq!(truncate_words("one two three four", 17), "one two three …");
        assert_eq!(truncate_words("one two, three four", 12), "one two …");
        assert_eq!(truncate_words("unbreakable", 5), "unbr…");
        assert_eq!(truncate_words("é é é é é é", 7), "é é é …");
    }

    #[test]
    fn code_is_told_from_prose() {
        assert!(looks_like_code("let total = items.iter().map(|x| x.len()).sum::<usize>();"));
        assert!(looks_like_code("for (int i = 0; i < n; i++) {"));
        assert!(!looks_like_code("I moved to Lisbon in 2019 (for work), and I love it."));
    }

    #[test]
    fn paths_are_told_from_prose() {
        for path in ["src/main.rs", "Cargo.toml", "/etc/nginx/nginx.conf", "crates/store/", "https://x.org/a"]
        {
            assert!(is_path(path), "{path}");
        }
        for word in ["and/or", "1/2", "e.g", "hello", "v1.2", "12/03/2026"] {
            assert!(!is_path(word), "{word}");
        }
    }
}
