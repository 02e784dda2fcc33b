//! The offline summarizer: deterministic extraction, no network, no model.
//!
//! It cannot paraphrase, so it selects and trims. The sources are cut into *units*: the
//! sentences of the messages (for a Level-0 node), or the lines of the children's bodies (for a
//! merge, so a level up is built from its children's facts, not from their headlines). Each
//! unit is scored by the information it carries: its content words (stop words and
//! conversational filler left out), weighted up when they recur in the chunk (its topics), when
//! they name something (capitalised words, numbers with their units, dates, times, file paths)
//! and when the unit states a decision; weighted down when it reads like code or tool output,
//! or only asks. Units are then picked greedily, best marginal gain per token first, where the
//! gain counts only the words no picked unit covers yet: a maximal-marginal-relevance selection
//! in which novelty is word coverage, so two units saying the same thing are not both kept.
//!
//! The body lists the picked units in time order, attributed to their speaker (a message's
//! `name`, else its role), with the date where it changes, in the sections the chunk has:
//! `Timeline`, `Decisions`, `Open questions`, `Files`. The headline names the chunk's people and
//! its main topics (the best-scoring recurring phrases) and the decision taken, if any.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use chrono::{Datelike, NaiveDate};

use crate::error::SummarizeError;
use crate::summarizer::{
    BoxFuture, SourceItem, SourceKind, Summarizer, Summary, SummaryRequest, one_line, truncate_chars,
};
use crate::tokens::{Encoding, TokenCounter};

/// The name extractive nodes carry in `summary_nodes.summarizer`.
pub const EXTRACTIVE: &str = "extractive";
/// The name of the flagged digests written while the summarizer is down.
pub const RAW_ARCHIVE: &str = "raw-archive";

/// Common English function words: they carry no fact of their own.
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
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
];

/// Words of conversation that carry no fact: greetings, thanks, reactions, hedges and
/// intensifiers. A generic list of spoken English, not of any one conversation.
const FILLER: &[&str] = &[
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
];

/// Words that mark a decision taken or a plan made.
const DECISION_MARKERS: &[&str] = &[
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
const PROPOSAL_MARKERS: &[&str] = &["we'll", "we will", "let's", "let us"];

/// First words of a sentence that only react ("Wow, ...", "Oh, ..."): trimmed before quoting.
const INTERJECTIONS: &[&str] = &[
    "hey", "hi", "hello", "wow", "oh", "ah", "aw", "aww", "ooh", "haha", "lol", "omg", "yeah", "yes", "yep",
    "ok", "okay", "sure", "well", "so", "anyway", "thanks", "cool", "great", "nice", "awesome",
];

/// Words of time: facts for the timeline, never a topic of the headline.
const TIME_WORDS: &[&str] = &[
    "last",
    "next",
    "this",
    "week",
    "weeks",
    "weekend",
    "weekends",
    "today",
    "tonight",
    "yesterday",
    "tomorrow",
    "day",
    "days",
    "month",
    "months",
    "year",
    "years",
    "time",
    "times",
    "morning",
    "afternoon",
    "evening",
    "night",
    "ago",
    "recently",
    "soon",
    "later",
    "earlier",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "hour",
    "hours",
    "minute",
    "minutes",
];

const FILE_EXTENSIONS: &[&str] = &[
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

/// [`STOPWORDS`] and [`FILLER`] as one set: words that are never a fact.
static NOT_CONTENT: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| STOPWORDS.iter().chain(FILLER).copied().collect());

fn is_content(lower: &str) -> bool {
    !NOT_CONTENT.contains(lower)
}

/// Longest quoted unit, in characters; longer sentences are cut into clauses first.
const UNIT_CHARS: usize = 240;
/// Most files listed.
const MAX_FILES: usize = 12;
/// Most topics named in a headline.
const HEADLINE_TOPICS: usize = 4;

/// The offline, deterministic summarizer (strata's default): no network and no API key.
#[derive(Clone, Debug)]
pub struct ExtractiveSummarizer {
    counter: TokenCounter,
}

impl Default for ExtractiveSummarizer {
    fn default() -> ExtractiveSummarizer {
        ExtractiveSummarizer::new(TokenCounter::new(Encoding::Cl100kBase))
    }
}

impl ExtractiveSummarizer {
    /// An extractive summarizer that fits its output to budgets counted by `counter`.
    pub fn new(counter: TokenCounter) -> ExtractiveSummarizer {
        ExtractiveSummarizer { counter }
    }

    /// The summary of `request`, computed synchronously (it is pure CPU work).
    pub fn summarize_sync(&self, request: &SummaryRequest) -> Summary {
        let chunk = match request.kind {
            SourceKind::Messages => Chunk::from_messages(&request.items),
            SourceKind::Summaries => Chunk::from_summaries(&request.items),
        };
        let mut summary = chunk.summarize(&self.counter, request.target_tokens);
        if request.kind == SourceKind::Messages {
            summary.memory_updates = crate::facts::stated(&request.items);
        }
        summary
    }

    /// A flagged digest for when the summarizer is down: the same extraction, labelled so a
    /// later pass knows to re-summarize it.
    pub fn raw_archive(&self, request: &SummaryRequest) -> Summary {
        let mut summary = self.summarize_sync(request);
        summary.headline = one_line(&format!("[raw archive] {}", summary.headline), 240);
        summary
    }
}

impl Summarizer for ExtractiveSummarizer {
    fn name(&self) -> &str {
        EXTRACTIVE
    }

    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<Summary, SummarizeError>> {
        Box::pin(async move { Ok(self.summarize_sync(request)) })
    }

    fn paraphrases(&self) -> bool {
        false
    }
}

/// Where a unit goes in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Section {
    Timeline,
    Decisions,
    OpenQuestions,
}

impl Section {
    const ALL: [Section; 3] = [Section::Timeline, Section::Decisions, Section::OpenQuestions];

    fn title(self) -> &'static str {
        match self {
            Section::Timeline => "Timeline",
            Section::Decisions => "Decisions",
            Section::OpenQuestions => "Open questions",
        }
    }

    fn from_heading(heading: &str) -> Option<Section> {
        match heading.to_ascii_lowercase().as_str() {
            "decisions" | "key decisions" => Some(Section::Decisions),
            "open questions" | "questions" => Some(Section::OpenQuestions),
            "files" | "tools" | "numbers" | "files touched" => None,
            _ => Some(Section::Timeline),
        }
    }
}

/// A piece of the sources the summary may quote.
#[derive(Debug)]
struct Unit {
    /// Which message (or child line) it comes from; units of one source are joined on output.
    source: usize,
    day: NaiveDate,
    speaker: String,
    text: String,
    section: Section,
    /// It states a decision taken (not only a proposal): the headline may quote it.
    decision: bool,
    /// Said by the user of an agent (role `user`, no name): requests say what the work was.
    request: bool,
    /// Ids of its distinct content words.
    words: Vec<usize>,
    /// How much of its words' weight counts: below 1 for code, tool output and questions.
    multiplier: f64,
    /// Characters of its line (speaker included), for estimating its tokens.
    chars: f64,
}

/// A short phrase of the chunk (a run of content words) for the `Also mentioned` line: the
/// names, numbers and things the picked sentences left out.
#[derive(Debug)]
struct Phrase {
    text: String,
    words: Vec<usize>,
}

/// What was picked, in the order it was picked (the last is the least valuable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    Unit(usize),
    Phrase(usize),
}

/// The greedy selection's state: words covered so far and tokens spent.
struct Selection<'a> {
    chunk: &'a Chunk,
    weights: Vec<f64>,
    /// Estimated tokens per character of this chunk's text.
    ratio: f64,
    covered: Vec<bool>,
    taken_units: Vec<bool>,
    taken_phrases: Vec<bool>,
    picks: Vec<Pick>,
    spent: f64,
}

impl Selection<'_> {
    fn unit_cost(&self, unit: &Unit) -> f64 {
        unit.chars * self.ratio + 2.0
    }

    fn gain(&self, words: &[usize]) -> f64 {
        words.iter().filter(|&&w| !self.covered[w]).map(|&w| self.weights[w]).sum()
    }

    fn take(&mut self, pick: Pick, cost: f64) {
        let words = match pick {
            Pick::Unit(index) => {
                self.taken_units[index] = true;
                &self.chunk.units[index].words
            }
            Pick::Phrase(index) => {
                self.taken_phrases[index] = true;
                &self.chunk.phrases[index].words
            }
        };
        words.iter().for_each(|&w| self.covered[w] = true);
        self.spent += cost;
        self.picks.push(pick);
    }

    /// Units by best marginal gain per token (words already covered count for nothing) until
    /// `budget` tokens are spent or no unit adds anything.
    fn units(&mut self, budget: f64) {
        loop {
            let mut best: Option<(f64, usize, f64)> = None;
            for (index, unit) in self.chunk.units.iter().enumerate() {
                let cost = self.unit_cost(unit);
                if self.taken_units[index] || self.spent + cost > budget {
                    continue;
                }
                let gain = self.gain(&unit.words) * unit.multiplier;
                // One plain new word is not worth a line.
                if gain < 1.5 {
                    continue;
                }
                let priority = gain / cost;
                if best.is_none_or(|(score, _, _)| priority > score) {
                    best = Some((priority, index, cost));
                }
            }
            let Some((_, index, cost)) = best else { break };
            self.take(Pick::Unit(index), cost);
        }
    }

    /// Phrases the same way, each worth at least a name or two plain words.
    fn phrases(&mut self, budget: f64) {
        loop {
            let mut best: Option<(f64, usize, f64)> = None;
            for (index, phrase) in self.chunk.phrases.iter().enumerate() {
                let cost = phrase.text.chars().count() as f64 * self.ratio + 1.0;
                if self.taken_phrases[index] || self.spent + cost > budget {
                    continue;
                }
                let gain = self.gain(&phrase.words);
                if gain < 2.0 {
                    continue;
                }
                let priority = gain / cost;
                if best.is_none_or(|(score, _, _)| priority > score) {
                    best = Some((priority, index, cost));
                }
            }
            let Some((_, index, cost)) = best else { break };
            self.take(Pick::Phrase(index), cost);
        }
    }
}

/// A content word of the chunk and what is known about it.
#[derive(Debug, Default)]
struct Word {
    /// Units it occurs in.
    units: u32,
    /// Seen capitalised away from the start of a sentence, or with inner capitals (a name).
    named: bool,
    /// Holds a digit (a number, date, time, version).
    numeric: bool,
    /// A whole file path or URL.
    path: bool,
    /// A speaker of the chunk: the line prefix names them already.
    speaker: bool,
}

/// The sources cut into units, with their vocabulary.
#[derive(Debug, Default)]
struct Chunk {
    units: Vec<Unit>,
    vocabulary: HashMap<String, usize>,
    words: Vec<Word>,
    /// Paths in order of first mention, with how often they were mentioned.
    files: Vec<(String, u32)>,
    /// Speakers with a name (not only a role), in order of first appearance.
    people: Vec<String>,
    /// Headline phrases of merged children: topics that already won once.
    child_topics: Vec<String>,
    /// Last question of the chunk left for the other side to answer, if any (a unit index).
    open_question: Option<usize>,
    /// Used as the body when nothing else could be extracted.
    fallback: String,
    /// Candidates for the `Also mentioned` line.
    phrases: Vec<Phrase>,
}

impl Chunk {
    fn from_messages(items: &[SourceItem]) -> Chunk {
        let mut chunk = Chunk::default();
        let mut speakers: HashSet<String> = HashSet::new();
        for item in items {
            if item.role != "tool" {
                let speaker = speaker_of(item);
                speakers.insert(speaker.to_lowercase());
                if item.name.is_some() && !chunk.people.contains(&speaker) {
                    chunk.people.push(speaker);
                }
            }
        }
        // The fallback may become the headline: a tool's output is never lifted there when anyone
        // else said something.
        let (said, output): (Vec<&SourceItem>, Vec<&SourceItem>) =
            items.iter().partition(|m| m.role != "tool");
        chunk.fallback = said
            .into_iter()
            .chain(output)
            .map(|m| first_sentence(&m.text, 100))
            .find(|s| !s.is_empty())
            .unwrap_or_default();
        let mut last_prose: Option<(usize, String)> = None;
        for (source, item) in items.iter().enumerate() {
            let day = item.time.date_naive();
            let speaker = if item.role == "tool" {
                item.tool.clone().map_or_else(|| "tool".to_owned(), |tool| format!("{tool} output"))
            } else {
                speaker_of(item)
            };
            chunk.collect_files(&item.text);
            let mut asked = None;
            for sentence in sentences(&item.text) {
                // Rendered tool calls (`[calls read_file: path=src/a.rs ]`) are not prose; their
                // paths are collected above.
                if sentence.starts_with("[calls ") {
                    continue;
                }
                for clause in clauses(sentence) {
                    let index = chunk.push_unit(source, day, &speaker, clause, item.role == "tool");
                    if let Some(index) = index {
                        chunk.units[index].request = item.role == "user" && item.name.is_none();
                    }
                    if let Some(index) = index
                        && chunk.units[index].text.ends_with('?')
                        && item.role != "tool"
                    {
                        asked = Some(index);
                    }
                }
            }
            if item.role != "tool" && item.text.chars().any(char::is_alphanumeric) {
                if last_prose.as_ref().is_some_and(|(_, who)| *who != speaker) {
                    // Someone else spoke after the question: it was answered (or moved on).
                    chunk.open_question = None;
                }
                if asked.is_some() {
                    chunk.open_question = asked;
                }
                last_prose = Some((source, speaker));
            }
        }
        if let Some(open) = chunk.open_question {
            chunk.units[open].section = Section::OpenQuestions;
        }
        chunk.finish(&speakers);
        chunk
    }

    fn from_summaries(items: &[SourceItem]) -> Chunk {
        let mut chunk = Chunk::default();
        let mut speakers: HashSet<String> = HashSet::new();
        let mut source = 0;
        for item in items {
            let mut lines = item.text.lines();
            let headline = lines.next().unwrap_or_default();
            chunk.child_topics.extend(headline_topics(headline));
            let (people, _) = split_people(headline);
            for person in people.split([',', '&']).map(str::trim).filter(|p| !p.is_empty() && p.len() < 40) {
                if !chunk.people.iter().any(|known| known == person) {
                    chunk.people.push(person.to_owned());
                }
            }
            if chunk.fallback.is_empty() {
                chunk.fallback = one_line(headline, 160);
            }
            let mut section = Some(Section::Timeline);
            let mut list_heading = String::new();
            let mut day = item.time.date_naive();
            let mut speaker = String::new();
            for line in lines {
                let trimmed = line.trim();
                if trimmed.is_empty() {
                    continue;
                }
                if !trimmed.starts_with("- ") && trimmed.ends_with(':') {
                    let heading = trimmed.trim_end_matches(':');
                    section = Section::from_heading(heading);
                    list_heading = heading.to_ascii_lowercase();
                    continue;
                }
                let text = trimmed.strip_prefix("- ").unwrap_or(trimmed);
                let Some(section) = section else {
                    if list_heading.starts_with("files") {
                        for path in text.split(", ") {
                            chunk.add_file(path.trim());
                        }
                    }
                    continue;
                };
                let (line_day, rest) = split_date(text, day);
                if let Some(line_day) = line_day {
                    day = line_day;
                }
                let (line_speaker, rest) = split_speaker(rest);
                match line_speaker {
                    Some(who) => speaker = who.to_owned(),
                    None if line_day.is_some() => speaker.clear(),
                    None => {}
                }
                if !speaker.is_empty() {
                    speakers.insert(speaker.to_lowercase());
                }
                source += 1;
                if let Some(index) = chunk.push_unit(source, day, &speaker.clone(), rest, false) {
                    chunk.units[index].section = section;
                }
            }
            source += 1;
        }
        chunk.finish(&speakers);
        chunk
    }

    /// Adds one unit; `None` when it holds no word at all.
    fn push_unit(
        &mut self,
        source: usize,
        day: NaiveDate,
        speaker: &str,
        text: &str,
        tool: bool,
    ) -> Option<usize> {
        let text = trim_interjections(text);
        if !text.chars().any(char::is_alphanumeric) {
            return None;
        }
        let text = truncate_words(&drop_intensifiers(text), UNIT_CHARS);
        let code = looks_like_code(&text);
        let mut ids = Vec::new();
        let mut first = true;
        for raw in text.split_whitespace() {
            let token = trim_token(raw);
            if is_path(token) {
                let id = self.word(&token.to_lowercase());
                self.words[id].path = true;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            for part in token.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|p| !p.is_empty()) {
                let lower = part.to_lowercase();
                let sentence_start = first;
                first = false;
                let numeric = part.chars().any(|c| c.is_ascii_digit());
                if !numeric && (lower.chars().count() < 2 || !is_content(&lower)) {
                    continue;
                }
                let id = self.word(&lower);
                let word = &mut self.words[id];
                word.numeric |= numeric;
                let mut chars = part.chars();
                let capital = chars.next().is_some_and(char::is_uppercase);
                let inner_capital = chars.any(char::is_uppercase);
                if (capital && !sentence_start) || inner_capital {
                    word.named = true;
                }
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        if ids.is_empty() {
            return None;
        }
        let lower = text.to_lowercase();
        let prose = !tool && !code;
        let decision = prose && DECISION_MARKERS.iter().any(|marker| lower.contains(marker));
        let proposal = prose && PROPOSAL_MARKERS.iter().any(|marker| lower.contains(marker));
        let question = text.ends_with('?');
        let mut multiplier = 1.0;
        if tool {
            multiplier *= 0.5;
        }
        if code {
            multiplier *= 0.2;
        }
        if question {
            multiplier *= 0.6;
        }
        if decision {
            multiplier *= 1.5;
        }
        let chars = (text.chars().count() + speaker.chars().count()) as f64;
        self.units.push(Unit {
            source,
            day,
            speaker: speaker.to_owned(),
            text,
            section: if decision || proposal { Section::Decisions } else { Section::Timeline },
            decision,
            request: false,
            words: ids,
            multiplier,
            chars,
        });
        Some(self.units.len() - 1)
    }

    fn word(&mut self, lower: &str) -> usize {
        if let Some(&id) = self.vocabulary.get(lower) {
            return id;
        }
        self.vocabulary.insert(lower.to_owned(), self.words.len());
        self.words.push(Word::default());
        self.words.len() - 1
    }

    /// Paths named anywhere: prose, tool calls (`path=src/a.rs`, `{"path":"src/a.rs"}`), output.
    fn collect_files(&mut self, text: &str) {
        for raw in text.split(|c: char| c.is_whitespace() || matches!(c, '=' | '"' | '(' | ',')) {
            let word = trim_token(raw);
            if is_path(word) {
                self.add_file(word);
            }
        }
    }

    fn add_file(&mut self, path: &str) {
        if path.is_empty() {
            return;
        }
        match self.files.iter_mut().find(|(known, _)| known == path) {
            Some((_, count)) => *count += 1,
            None => self.files.push((path.to_owned(), 1)),
        }
    }

    /// Counts in how many units each word occurs and marks the speakers.
    fn finish(&mut self, speakers: &HashSet<String>) {
        for unit in &self.units {
            for &id in &unit.words {
                self.words[id].units += 1;
            }
        }
        // A speaker's name, or the start of it ("Mel" for Melanie), mostly addresses them.
        for (lower, &id) in &self.vocabulary {
            let alias = |speaker: &String| {
                speaker == lower || lower.chars().count() >= 3 && speaker.starts_with(lower.as_str())
            };
            if speakers.iter().any(alias) {
                self.words[id].speaker = true;
            }
        }
        self.collect_phrases();
    }

    /// The weight of one content word: recurring words are the chunk's topics, names, numbers
    /// and paths are the facts a reader asks for, speakers are named by the line prefix.
    fn weight(&self, id: usize) -> f64 {
        let word = &self.words[id];
        if word.speaker {
            return 0.0;
        }
        // Every distinct word is worth the same, counted once however often it recurs (the
        // selection's coverage does that); a word in a large share of the units is the
        // chunk's background (an inverse document frequency, full up to 5% of the units).
        let units = f64::from(word.units.max(1));
        let mut weight = 1.0;
        let all = self.units.len() as f64;
        if all >= 20.0 {
            weight *= ((all / units).ln() / 20f64.ln()).min(1.0);
        }
        if word.named {
            weight *= 2.0;
        }
        if word.numeric {
            weight *= 1.5;
        }
        if word.path {
            weight *= 2.0;
        }
        weight
    }

    /// A fresh selection with the word weights of this chunk.
    fn selection(&self, ratio: f64) -> Selection<'_> {
        Selection {
            chunk: self,
            weights: (0..self.words.len()).map(|id| self.weight(id)).collect(),
            ratio,
            covered: vec![false; self.words.len()],
            taken_units: vec![false; self.units.len()],
            taken_phrases: vec![false; self.phrases.len()],
            picks: Vec::new(),
            spent: 0.0,
        }
    }

    /// The phrases of the `Also mentioned` line: runs of up to three content words from the
    /// prose units, each once.
    fn collect_phrases(&mut self) {
        let mut seen: HashSet<String> = HashSet::new();
        let mut phrases = Vec::new();
        for unit in self.units.iter().filter(|unit| unit.multiplier >= 0.5) {
            for run in content_runs(&unit.text, true) {
                for window in run.chunks(3) {
                    let text = window.join(" ");
                    if !seen.insert(text.to_lowercase()) {
                        continue;
                    }
                    let words: Vec<usize> = window
                        .iter()
                        .flat_map(|w| w.split(|c: char| !(c.is_alphanumeric() || c == '_')))
                        .filter_map(|w| self.vocabulary.get(&w.to_lowercase()).copied())
                        .collect();
                    // A phrase names something (a name, a number, a path) or recurs in the chunk;
                    // one-off pairs of plain words are mostly noise.
                    let named = words.iter().any(|&w| {
                        let word = &self.words[w];
                        (word.named || word.numeric || word.path) && !word.speaker
                    });
                    let recurring = words.len() >= 2 && words.iter().all(|&w| self.words[w].units >= 2);
                    if named || recurring {
                        phrases.push(Phrase { text, words });
                    }
                }
            }
        }
        self.phrases = phrases;
    }

    /// The chunk's main topics: its best recurring phrases (runs of content words), each
    /// scored by its words' weights and how often it occurs; phrases sharing a word with a
    /// better one are skipped.
    fn topics(&self, max: usize) -> Vec<String> {
        let mut phrases: HashMap<String, (f64, u32, String, usize)> = HashMap::new();
        let mut add = |key: String, shown: String, score: f64, order: usize| {
            let entry = phrases.entry(key).or_insert((score, 0, shown, order));
            entry.1 += 1;
        };
        let mut order = 0;
        for topic in &self.child_topics {
            let ids: Vec<usize> = topic
                .split_whitespace()
                .filter_map(|w| self.vocabulary.get(&w.to_lowercase()).copied())
                .collect();
            let score: f64 = ids.iter().map(|&id| self.weight(id)).sum::<f64>() + 1.0;
            add(topic.to_lowercase(), topic.clone(), score, order);
            order += 1;
        }
        // In agent work (no named speakers) the user's requests say what the chunk was about;
        // the assistant's and the tools' words recur in every chunk alike.
        let requests_only = self.people.is_empty() && self.units.iter().any(|unit| unit.request);
        for unit in &self.units {
            if unit.multiplier < 0.5 || requests_only && !unit.request {
                continue;
            }
            let runs = content_runs(&unit.text, false);
            // Times and bare numbers are facts, not topics: they split a run.
            let runs = runs.iter().flat_map(|run| {
                run.split(|w| {
                    let lower = w.to_lowercase();
                    TIME_WORDS.contains(&lower.as_str()) || !lower.chars().any(char::is_alphabetic)
                })
            });
            for run in runs.filter(|run| !run.is_empty()) {
                let ids: Vec<Option<usize>> =
                    run.iter().map(|w| self.vocabulary.get(&w.to_lowercase()).copied()).collect();
                if ids.iter().any(|id| id.is_none_or(|id| self.words[id].speaker)) {
                    continue;
                }
                // Long runs give their last two words, which in English usually hold the head noun.
                let run = if run.len() > 3 { &run[run.len() - 2..] } else { run };
                let ids: Vec<usize> =
                    run.iter().filter_map(|w| self.vocabulary.get(&w.to_lowercase()).copied()).collect();
                let score: f64 = ids.iter().map(|&id| self.weight(id)).sum();
                let shown = run.join(" ");
                add(shown.to_lowercase(), shown, score, order);
                order += 1;
            }
        }
        let mut ranked: Vec<(f64, usize, String)> = phrases
            .into_values()
            .map(|(score, count, shown, order)| (score * (1.0 + f64::from(count).ln()), order, shown))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<String> = Vec::new();
        let mut used: HashSet<String> = HashSet::new();
        for (_, _, phrase) in ranked {
            let words: Vec<String> = phrase.split_whitespace().map(str::to_lowercase).collect();
            if words.iter().any(|w| used.contains(w)) {
                continue;
            }
            used.extend(words);
            chosen.push(phrase);
            if chosen.len() == max {
                break;
            }
        }
        chosen
    }

    /// The people, the topics and the decision taken, if any, in at most `max_chars`.
    fn headline(&self, topics: &[String], decision: Option<&Unit>, max_chars: usize) -> String {
        let mut headline = String::new();
        if !self.people.is_empty() {
            let shown: Vec<&str> = self.people.iter().take(4).map(String::as_str).collect();
            headline.push_str(&shown.join(", "));
            headline.push_str(": ");
        }
        if topics.is_empty() {
            headline.push_str(&truncate_words(&self.fallback, 100));
        } else {
            let mut topics = topics.to_vec();
            if !topics[0].contains('/') {
                topics[0] = capitalize(&topics[0]);
            }
            headline.push_str(&topics.join(", "));
        }
        if let Some(decision) = decision {
            headline.push_str("; ");
            headline.push_str(&truncate_words(decision.text.trim_end_matches(['.', '!', '-', '–', ' ']), 90));
        }
        let headline = truncate_words(&headline, max_chars.saturating_sub(1));
        if headline.ends_with('…') {
            return headline;
        }
        format!("{}.", headline.trim_end_matches(['.', ',', ';', ':', ' ']))
    }

    /// The body: picked units in time order under their sections, then the files.
    fn body(&self, picks: &[Pick], files: usize) -> String {
        let picked: Vec<usize> = picks
            .iter()
            .filter_map(|pick| match pick {
                Pick::Unit(index) => Some(*index),
                Pick::Phrase(_) => None,
            })
            .collect();
        let mut phrases: Vec<usize> = picks
            .iter()
            .filter_map(|pick| match pick {
                Pick::Phrase(index) => Some(*index),
                Pick::Unit(_) => None,
            })
            .collect();
        phrases.sort_unstable();
        let mut body = String::new();
        for section in Section::ALL {
            let mut units: Vec<usize> =
                picked.iter().copied().filter(|&i| self.units[i].section == section).collect();
            if units.is_empty() {
                continue;
            }
            units.sort_unstable();
            body.push_str(section.title());
            body.push_str(":\n");
            let mut last_day = None;
            let mut index = 0;
            while index < units.len() {
                let unit = &self.units[units[index]];
                let mut text = unit.text.clone();
                // Consecutive picks from one source read as one line; a clause whose follower
                // was not picked loses its trailing comma or dash.
                let mut next = index + 1;
                while next < units.len() && self.units[units[next]].source == unit.source {
                    if units[next] != units[next - 1] + 1 {
                        trim_clause_end(&mut text);
                    }
                    text.push(' ');
                    text.push_str(&self.units[units[next]].text);
                    next += 1;
                }
                trim_clause_end(&mut text);
                body.push_str("- ");
                if last_day != Some(unit.day) {
                    // The year is written when it is new to the section.
                    let format = match last_day {
                        Some(day) if day.year() == unit.day.year() => "%m-%d ",
                        _ => "%Y-%m-%d ",
                    };
                    body.push_str(&unit.day.format(format).to_string());
                    last_day = Some(unit.day);
                }
                if !unit.speaker.is_empty() {
                    body.push_str(&unit.speaker);
                    body.push_str(": ");
                }
                body.push_str(&text);
                body.push('\n');
                index = next;
            }
        }
        if !phrases.is_empty() {
            body.push_str("Also mentioned:\n- ");
            let shown: Vec<&str> = phrases.iter().map(|&i| self.phrases[i].text.as_str()).collect();
            body.push_str(&shown.join(", "));
            body.push('\n');
        }
        if files > 0 {
            body.push_str("Files:\n- ");
            body.push_str(&self.ranked_files().into_iter().take(files).collect::<Vec<_>>().join(", "));
            body.push('\n');
        }
        body.trim_end().to_owned()
    }

    /// Paths by how often they were mentioned, then by first mention.
    fn ranked_files(&self) -> Vec<String> {
        let mut files: Vec<(usize, &(String, u32))> = self.files.iter().enumerate().collect();
        files.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
        files.into_iter().map(|(_, (path, _))| path.clone()).take(MAX_FILES).collect()
    }

    /// Selects and renders within `target` tokens, counted exactly.
    fn summarize(&self, counter: &TokenCounter, target: u32) -> Summary {
        let target_f = f64::from(target);
        // Tokens per character of this chunk, measured on a sample of its text (prose, code
        // and other languages differ by a factor of two).
        let mut sample = String::new();
        for unit in &self.units {
            if sample.len() > 800 {
                break;
            }
            sample.push_str(&unit.text);
            sample.push('\n');
        }
        let ratio = if sample.is_empty() {
            0.3
        } else {
            (f64::from(counter.text(&sample)) / sample.chars().count() as f64).clamp(0.15, 1.0)
        };
        // Aim a little under the target, so that low estimates rarely force a second fit.
        let aim = target_f * 0.92;
        let files = self.ranked_files();
        // Files are cheap and what coding work is about; they get at most a tenth of the budget.
        let mut file_count = 0;
        let mut file_cost = 0.0;
        for path in &files {
            let cost = path.chars().count() as f64 * ratio + 1.0;
            if file_cost + cost > target_f / 10.0 {
                break;
            }
            file_cost += cost;
            file_count += 1;
        }
        if file_count > 0 {
            file_cost += 3.0;
        }
        // The headline is what every scaffold lists: at most a quarter of the budget.
        let headline_max = (target_f / 4.0).clamp(8.0, 60.0);
        let topics = self.topics(HEADLINE_TOPICS);
        let decisions = self.units.iter().any(|unit| unit.decision);
        let topic_tokens = self.headline(&topics, None, usize::MAX).chars().count() as f64 * ratio;
        let headline_cost = (topic_tokens + if decisions { 24.0 } else { 0.0 }).min(headline_max);
        let headings = 4.0 * 2.0;
        let budget = (aim - headline_cost - file_cost - headings).max(0.0);

        let mut selection = self.selection(ratio);
        if let Some(open) = self.open_question {
            let cost = selection.unit_cost(&self.units[open]);
            if cost <= budget / 4.0 {
                selection.take(Pick::Unit(open), cost);
            }
        }
        // Sentences first, then the names and things they left out, then sentences again.
        selection.units(budget * 0.75);
        selection.phrases(budget);
        selection.units(budget);
        let mut picks = selection.picks;
        loop {
            let decision = picks
                .iter()
                .filter_map(|pick| match pick {
                    Pick::Unit(index) => Some(&self.units[*index]),
                    Pick::Phrase(_) => None,
                })
                .find(|unit| unit.decision);
            let mut max_chars = (headline_max * 4.0) as usize;
            let mut headline = self.headline(&topics, decision, max_chars);
            while f64::from(counter.text(&headline)) > headline_max && max_chars > 12 {
                max_chars = max_chars * 3 / 4;
                headline = self.headline(&topics, decision, max_chars);
            }
            let mut body = self.body(&picks, file_count);
            if body.is_empty() {
                body = format!("- {}", truncate_chars(&self.fallback, 80));
            }
            let tokens = counter.text(&headline) + counter.text(&body);
            if tokens <= target {
                return Summary::new(headline, body);
            }
            // Over the target (the estimates were low): drop the last, least valuable picks,
            // as many as the excess needs by estimate, and count again.
            let mut excess = f64::from(tokens - target);
            while excess > 0.0 {
                match picks.pop() {
                    Some(Pick::Unit(index)) => excess -= self.units[index].chars * ratio + 2.0,
                    Some(Pick::Phrase(index)) => {
                        excess -= self.phrases[index].text.len() as f64 * ratio + 1.0
                    }
                    None if file_count > 0 => {
                        file_count -= 1;
                        excess -= 4.0;
                    }
                    None => {
                        // Nothing left to drop: the shortest honest summary.
                        return Summary::new(truncate_chars(&headline, 24), "- (see sources)");
                    }
                }
            }
        }
    }
}

/// Who said it: the message's `name`, else its role.
fn speaker_of(item: &SourceItem) -> String {
    item.name.clone().filter(|name| !name.trim().is_empty()).unwrap_or_else(|| item.role.clone())
}

/// A leading `YYYY-MM-DD ` on a body line, or `MM-DD ` in the year of `current`.
fn split_date(text: &str, current: NaiveDate) -> (Option<NaiveDate>, &str) {
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
fn split_speaker(text: &str) -> (Option<&str>, &str) {
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

/// The `People: ` prefix of a headline this summarizer wrote, and the rest: a prefix counts
/// only when it is a list of names (capitalised, at most two words each, no `;`).
fn split_people(headline: &str) -> (&str, &str) {
    match headline.split_once(": ") {
        Some((people, rest))
            if !people.contains(';')
                && people.split(", ").all(|name| {
                    name.split_whitespace().count() <= 2 && name.starts_with(char::is_uppercase)
                }) =>
        {
            (people, rest)
        }
        _ => ("", headline),
    }
}

/// The topics a headline this summarizer wrote names: the comma-separated phrases after the
/// people, before the decision.
fn headline_topics(headline: &str) -> Vec<String> {
    let text = split_people(headline).1;
    let text = text.split(';').next().unwrap_or_default().trim_end_matches(['.', '…', ' ']);
    text.split(", ")
        .map(|p| p.trim().to_owned())
        .filter(|p| {
            !p.is_empty() && p.split_whitespace().count() <= 3 && p.chars().any(char::is_alphanumeric)
        })
        .collect()
}

/// Runs of consecutive content words in a text (broken by stop words, filler and punctuation),
/// with or without the content of bracketed annotations (`[shares image: a photo of a dog]`).
fn content_runs(text: &str, annotations: bool) -> Vec<Vec<&str>> {
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
fn trim_clause_end(text: &mut String) {
    let trimmed = text.trim_end_matches([',', ';', '–', '—', '-', ' ']).len();
    text.truncate(trimmed);
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The sentence without the reactions it opens with ("Wow, that's cool" -> "that's cool").
fn trim_interjections(text: &str) -> &str {
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

/// Words that only intensify ("really important"): dropped from quotes, which keeps their
/// meaning and saves tokens for facts.
const INTENSIFIERS: &[&str] =
    &["really", "very", "super", "totally", "actually", "literally", "definitely", "absolutely", "basically"];

/// The text without intensifiers before another word.
fn drop_intensifiers(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut kept: Vec<&str> = Vec::with_capacity(words.len());
    for (index, word) in words.iter().enumerate() {
        let bare = word.to_ascii_lowercase();
        let before_word = words.get(index + 1).is_some_and(|next| next.starts_with(char::is_alphanumeric));
        if before_word && INTENSIFIERS.contains(&bare.as_str()) {
            continue;
        }
        kept.push(word);
    }
    kept.join(" ")
}

/// `text` on one line, cut at a word boundary to at most `max` characters.
fn truncate_words(text: &str, max: usize) -> String {
    let line = one_line(text, usize::MAX);
    if line.chars().count() <= max {
        return line;
    }
    let mut cut = String::new();
    for word in line.split(' ') {
        if cut.chars().count() + word.chars().count() + 2 > max {
            break;
        }
        if !cut.is_empty() {
            cut.push(' ');
        }
        cut.push_str(word);
    }
    if cut.is_empty() {
        return truncate_chars(&line, max);
    }
    format!("{} …", cut.trim_end_matches([',', ';', ':']))
}

/// The first sentence of a text, on one line.
fn first_sentence(text: &str, max_chars: usize) -> String {
    sentences(text).next().map(|s| one_line(s, max_chars)).unwrap_or_default()
}

/// Sentences and lines of a text: split at line breaks and at `.`, `!`, `?` followed by a space.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
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
fn clauses(sentence: &str) -> Vec<&str> {
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
fn looks_like_code(text: &str) -> bool {
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

fn trim_token(word: &str) -> &str {
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
fn is_path(word: &str) -> bool {
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
    use chrono::{DateTime, TimeZone, Utc};

    use super::*;

    fn at(day: u32, minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, day, 10, minute, 0).unwrap()
    }

    fn said(name: Option<&str>, role: &str, minute: u32, text: &str) -> SourceItem {
        SourceItem {
            reference: format!("message {minute}"),
            role: role.into(),
            name: name.map(Into::into),
            tool: None,
            time: at(1, minute),
            text: text.into(),
        }
    }

    fn request(items: Vec<SourceItem>, kind: SourceKind, target: u32) -> SummaryRequest {
        SummaryRequest {
            kind,
            level: 0,
            persona: "p".into(),
            items,
            source_tokens: 4_000,
            target_tokens: target,
            retry: None,
        }
    }

    fn tokens(summary: &Summary) -> u32 {
        let counter = TokenCounter::new(Encoding::Cl100kBase);
        counter.text(&summary.headline) + counter.text(&summary.body)
    }

    /// Two friends catching up: small talk around a few facts.
    fn friends() -> Vec<SourceItem> {
        let mut items = vec![
            said(Some("Ines"), "user", 0, "Hey Rui! So good to hear from you. How are things?"),
            said(Some("Rui"), "assistant", 1, "Hi Ines! All good, just busy. You?"),
            said(
                Some("Ines"),
                "user",
                2,
                "Wow, big news: I adopted a greyhound called Biscuit from the shelter in Porto last Saturday.",
            ),
            said(Some("Rui"), "assistant", 3, "That's amazing! Congrats, I love that."),
            said(Some("Ines"), "user", 4, "Thanks! He sleeps 18 hours a day, haha."),
            said(
                Some("Rui"),
                "assistant",
                5,
                "My sister starts her nursing degree at Coimbra in September, we are all so proud.",
            ),
            said(Some("Ines"), "user", 6, "That's great, tell her congrats from me!"),
            said(Some("Rui"), "assistant", 7, "Will do! Talk soon."),
        ];
        for minute in 8..30 {
            items.push(said(Some("Ines"), "user", minute, "Haha yes, so true, that is really nice!"));
        }
        items
    }

    #[test]
    fn friends_chat_keeps_the_facts_with_their_speakers() {
        let summary =
            ExtractiveSummarizer::default().summarize_sync(&request(friends(), SourceKind::Messages, 120));
        let body = &summary.body;
        assert!(body.starts_with("Timeline:\n- 2026-03-01 "), "{body}");
        assert!(body.contains("Ines: big news: I adopted a greyhound called Biscuit"), "{body}");
        assert!(body.contains("Rui: My sister starts her nursing degree at Coimbra in September"), "{body}");
        assert!(body.contains("18 hours"), "{body}");
        // Reactions carry nothing: none is quoted.
        assert!(!body.contains("so true") && !body.contains("Talk soon"), "{body}");
        assert!(summary.headline.starts_with("Ines, Rui: "), "{}", summary.headline);
        assert!(!summary.headline.chars().any(|c| c.is_ascii_digit()), "no counts: {}", summary.headline);
        assert!(tokens(&summary) <= 120);
    }

    fn coding() -> Vec<SourceItem> {
        let mut tool = said(
            None,
            "tool",
            2,
            "fn main() {\n    let port: u16 = env::var(\"PORT\")?.parse()?;\n}\nerror[E0277]: the `?` operator can only be used in a function that returns `Result`",
        );
        tool.tool = Some("cargo_build".into());
        let mut call = said(None, "assistant", 1, "Building it.\n[calls cargo_build: path=src/main.rs ]");
        call.tool = Some("cargo_build".into());
        vec![
            said(None, "user", 0, "The server should read its port from the PORT variable, see src/main.rs."),
            call,
            tool,
            said(
                None,
                "assistant",
                3,
                "main cannot use the operator unless it returns Result. We decided to make main return anyhow::Result and default the port to 8080.",
            ),
            said(None, "user", 4, "Fine. Should the default live in config/server.toml instead?"),
        ]
    }

    #[test]
    fn coding_chunk_has_decisions_files_and_an_open_question() {
        let summary =
            ExtractiveSummarizer::default().summarize_sync(&request(coding(), SourceKind::Messages, 200));
        let body = &summary.body;
        assert!(
            body.contains(
                "Decisions:\n- 2026-03-01 assistant: We decided to make main return anyhow::Result"
            ),
            "{body}"
        );
        assert!(
            body.contains(
                "Open questions:\n- 2026-03-01 user: Should the default live in config/server.toml instead?"
            ),
            "{body}"
        );
        assert!(body.contains("Files:\n- src/main.rs, config/server.toml"), "{body}");
        // Code is data, not something anyone said.
        assert!(!body.contains("let port"), "{body}");
        assert!(summary.headline.contains("We decided to make main return"), "{}", summary.headline);
        assert!(!summary.headline.starts_with("user"), "roles are not people: {}", summary.headline);
    }

    #[test]
    fn output_fits_the_target_and_is_deterministic() {
        let summarizer = ExtractiveSummarizer::default();
        let mut items = Vec::new();
        for round in 0..40 {
            items.extend(friends().into_iter().chain(coding()).map(|mut m| {
                m.text = format!("{} (round {round}, see notes/round_{round}.md)", m.text);
                m
            }));
        }
        for target in [16, 48, 120, 400] {
            let req = request(items.clone(), SourceKind::Messages, target);
            let summary = summarizer.summarize_sync(&req);
            assert!(tokens(&summary) <= target, "{} > {target}: {summary:?}", tokens(&summary));
            assert!(!summary.body.trim().is_empty() && !summary.headline.trim().is_empty());
            assert_eq!(summary, summarizer.summarize_sync(&req));
        }
    }

    #[test]
    fn merges_are_built_from_the_childrens_facts() {
        let summarizer = ExtractiveSummarizer::default();
        let first = summarizer.summarize_sync(&request(friends(), SourceKind::Messages, 150));
        let second = summarizer.summarize_sync(&request(coding(), SourceKind::Messages, 150));
        let child = |summary: &Summary, day| SourceItem {
            reference: "node".into(),
            role: "summary".into(),
            name: None,
            tool: None,
            time: at(day, 0),
            text: format!("{}\n{}", summary.headline, summary.body),
        };
        let merged = summarizer.summarize_sync(&request(
            vec![child(&first, 1), child(&second, 2)],
            SourceKind::Summaries,
            200,
        ));
        let body = &merged.body;
        // Facts of both children survive with their speakers and dates, not their headlines.
        assert!(body.contains("Ines: big news: I adopted a greyhound called Biscuit"), "{body}");
        assert!(body.contains("Decisions:\n- 2026-03-01 assistant: We decided"), "{body}");
        assert!(body.contains("src/main.rs"), "{body}");
        assert!(!body.contains(&first.headline), "{body}");
        assert!(merged.headline.starts_with("Ines, Rui: "), "{}", merged.headline);
        assert!(!merged.headline.contains("summaries"), "{}", merged.headline);
        assert!(tokens(&merged) <= 200);
    }

    #[test]
    fn a_merge_reads_bodies_of_other_writers_too() {
        let child = SourceItem {
            reference: "node".into(),
            role: "summary".into(),
            name: None,
            tool: None,
            time: at(1, 0),
            text: "The team moved the cluster.\nTimeline:\n- 10:00 moved the cluster to Frankfurt\nPitfalls:\n- DNS lagged for 20 minutes\nFiles:\n- infra/dns.tf, infra/main.tf".into(),
        };
        let merged = ExtractiveSummarizer::default().summarize_sync(&request(
            vec![child.clone(), SourceItem { time: at(2, 0), ..child }],
            SourceKind::Summaries,
            120,
        ));
        assert!(merged.body.contains("Frankfurt") && merged.body.contains("20 minutes"), "{}", merged.body);
        assert!(merged.body.contains("infra/dns.tf"), "{}", merged.body);
    }

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
        assert_eq!(drop_intensifiers("It is really important, really."), "It is important, really.");
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
