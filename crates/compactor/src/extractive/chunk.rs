//! Extraction: the sources cut into units (sentences and clauses of the messages, or lines of
//! the children's bodies), their content words and what each word is (a name, a number, a path,
//! a speaker), the word weights, the candidate phrases and the chunk's topics.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use strata_seam::Role;

use super::segment::{
    DECISION_MARKERS, PROPOSAL_MARKERS, capitalize, clauses, compress_quote, content_runs, first_sentence,
    headline_clauses, is_content, is_path, looks_like_code, sentences, speaker_of, split_date, split_people,
    split_speaker, trim_clause_end, trim_interjections, trim_request_opener, trim_token, truncate_words,
};
use crate::summarizer::{SourceItem, one_line_within};

/// Longest quoted unit, in characters; longer sentences are cut into clauses first.
pub(super) const UNIT_CHARS: usize = 240;
/// Longest clause a headline quotes, in characters.
const HEADLINE_CLAUSE_CHARS: usize = 70;

/// Where a unit goes in the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Section {
    Timeline,
    Decisions,
    OpenQuestions,
}

impl Section {
    pub(super) const ALL: [Section; 3] = [Section::Timeline, Section::Decisions, Section::OpenQuestions];

    pub(super) fn title(self) -> &'static str {
        match self {
            Section::Timeline => "Timeline",
            Section::Decisions => "Decisions",
            Section::OpenQuestions => "Open questions",
        }
    }

    pub(super) fn from_heading(heading: &str) -> Option<Section> {
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
pub(super) struct Unit {
    /// Which message (or child line) it comes from; units of one source are joined on output.
    pub(super) source: usize,
    pub(super) day: NaiveDate,
    pub(super) speaker: String,
    pub(super) text: String,
    pub(super) section: Section,
    /// It states a decision taken (not only a proposal): the headline may quote it.
    pub(super) decision: bool,
    /// Said by the user of an agent (role `user`, no name): requests say what the work was.
    pub(super) request: bool,
    /// Someone's words, not code or a tool's output: only these are embedded.
    pub(super) prose: bool,
    /// Ids of its distinct content words.
    pub(super) words: Vec<usize>,
    /// How much of its words' weight counts: below 1 for code, tool output and questions.
    pub(super) multiplier: f64,
    /// Characters of its line (speaker included), for estimating its tokens.
    pub(super) chars: f64,
}

/// A clause of the headline's story: the unit it quotes (none for a merge's, which quote the
/// children's headlines) and its text as quoted.
#[derive(Debug)]
pub(super) struct StoryClause {
    pub(super) unit: Option<usize>,
    pub(super) text: String,
}

/// A short phrase of the chunk (a run of content words) for the `Also mentioned` line: the
/// names, numbers and things the picked sentences left out.
#[derive(Debug)]
pub(super) struct Phrase {
    pub(super) text: String,
    pub(super) words: Vec<usize>,
}

/// A content word of the chunk and what is known about it.
#[derive(Debug, Default)]
pub(super) struct Word {
    /// Units it occurs in.
    pub(super) units: u32,
    /// Seen capitalised away from the start of a sentence, or with inner capitals (a name).
    pub(super) named: bool,
    /// Holds a digit (a number, date, time, version).
    pub(super) numeric: bool,
    /// A whole file path or URL.
    pub(super) path: bool,
    /// A speaker of the chunk: the line prefix names them already.
    pub(super) speaker: bool,
}

/// The sources cut into units, with their vocabulary.
#[derive(Debug, Default)]
pub(super) struct Chunk {
    pub(super) units: Vec<Unit>,
    pub(super) vocabulary: HashMap<String, usize>,
    pub(super) words: Vec<Word>,
    /// Paths in order of first mention, with how often they were mentioned.
    pub(super) files: Vec<(String, u32)>,
    /// Speakers with a name (not only a role), in order of first appearance.
    pub(super) people: Vec<String>,
    /// The clauses of merged children's headlines: what each part of the merge was about.
    pub(super) child_headlines: Vec<String>,
    /// Last question of the chunk left for the other side to answer, if any (a unit index).
    pub(super) open_question: Option<usize>,
    /// Used as the body when nothing else could be extracted.
    pub(super) fallback: String,
    /// Candidates for the `Also mentioned` line.
    pub(super) phrases: Vec<Phrase>,
}

impl Chunk {
    pub(super) fn from_messages(items: &[SourceItem]) -> Chunk {
        let mut chunk = Chunk::default();
        let mut speakers: HashSet<String> = HashSet::new();
        for item in items {
            if !item.origin.is(Role::Tool) {
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
            items.iter().partition(|m| !m.origin.is(Role::Tool));
        chunk.fallback = said
            .into_iter()
            .chain(output)
            .map(|m| first_sentence(&m.text, 100))
            .find(|s| !s.is_empty())
            .unwrap_or_default();
        let mut last_prose: Option<(usize, String)> = None;
        for (source, item) in items.iter().enumerate() {
            let day = item.time.date_naive();
            let is_output = item.origin.is(Role::Tool);
            let speaker = if is_output {
                item.tool.clone().map_or_else(|| "tool".to_owned(), |tool| format!("{tool} output"))
            } else {
                speaker_of(item)
            };
            // Tool calls are not prose: only the paths in their arguments are kept.
            chunk.collect_files(&item.full_text());
            let mut asked = None;
            for sentence in sentences(&item.text) {
                for clause in clauses(sentence) {
                    let index = chunk.push_unit(source, day, &speaker, clause, is_output);
                    if let Some(index) = index {
                        chunk.units[index].request = item.origin.is(Role::User) && item.name.is_none();
                    }
                    if let Some(index) = index
                        && chunk.units[index].text.ends_with('?')
                        && !is_output
                    {
                        asked = Some(index);
                    }
                }
            }
            if !is_output && item.text.chars().any(char::is_alphanumeric) {
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

    pub(super) fn from_summaries(items: &[SourceItem]) -> Chunk {
        let mut chunk = Chunk::default();
        let mut speakers: HashSet<String> = HashSet::new();
        let mut source = 0;
        for item in items {
            let mut lines = item.text.lines();
            let headline = lines.next().unwrap_or_default();
            for clause in headline_clauses(headline) {
                // The child's body leaves out what its headline says, so the headline's clauses
                // are facts a merge may pick too, not only candidates for its own headline.
                let (who, said) = split_speaker(&clause);
                source += 1;
                chunk.push_unit(source, item.time.date_naive(), who.unwrap_or_default(), said, false);
                if let Some(who) = who {
                    speakers.insert(who.to_lowercase());
                }
                if !chunk.child_headlines.contains(&clause) {
                    chunk.child_headlines.push(clause);
                }
            }
            let (people, _) = split_people(headline);
            for person in people.split([',', '&']).map(str::trim).filter(|p| !p.is_empty() && p.len() < 40) {
                if !chunk.people.iter().any(|known| known == person) {
                    chunk.people.push(person.to_owned());
                }
            }
            if chunk.fallback.is_empty() {
                chunk.fallback = one_line_within(headline, 160);
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
                // A line may hold several picks of one speaker: each sentence and clause is a
                // unit again, so a merge can keep the part that carries the fact.
                source += 1;
                for sentence in sentences(rest) {
                    for clause in clauses(sentence) {
                        if let Some(index) = chunk.push_unit(source, day, &speaker.clone(), clause, false) {
                            chunk.units[index].section = section;
                        }
                    }
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
        let text = truncate_words(&compress_quote(text), UNIT_CHARS);
        let code = looks_like_code(&text);
        let mut ids = Vec::new();
        let mut first = true;
        let mut lower = String::new();
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
                // Most words are ASCII: lowered in place, without a new string each.
                lower.clear();
                if part.is_ascii() {
                    lower.push_str(part);
                    lower.make_ascii_lowercase();
                } else {
                    lower.push_str(&part.to_lowercase());
                }
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
            prose,
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
    pub(super) fn weight(&self, id: usize) -> f64 {
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

    /// Candidates for the `Also mentioned` line: runs of up to three content words of the
    /// prose units that name something, each once.
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
                    // A phrase names something (a name, a number, a path); pairs of plain words,
                    // recurring or not, read as noise ("long day", "tough times").
                    let named = words.iter().any(|&w| {
                        let word = &self.words[w];
                        (word.named || word.numeric || word.path) && !word.speaker
                    });
                    if named {
                        phrases.push(Phrase { text, words });
                    }
                }
            }
        }
        self.phrases = phrases;
    }

    /// The ids of the chunk's content words in `text`, sorted (so that sums over them add in
    /// the same order every run), each once.
    pub(super) fn words_of(&self, text: &str) -> Vec<usize> {
        let mut words: Vec<usize> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter_map(|w| self.vocabulary.get(&w.to_lowercase()).copied())
            .collect();
        words.sort_unstable();
        words.dedup();
        words
    }

    /// What the chunk was about, in its own words: the clauses that best cover its recurring
    /// content words (each word weighted by its weight and, through a logarithm, by how many
    /// units it occurs in: the chunk's topics), shorter clauses preferred, none repeating half
    /// of another's words; in time order, at most `max`. Candidates are the prose statements
    /// (in agent work, with no named speakers, the user's requests, which say what the work was;
    /// the assistant's and the tools' words recur in every chunk alike), or for a merge the
    /// clauses of the children's headlines.
    pub(super) fn story(&self, max: usize) -> Vec<StoryClause> {
        let requests_only = self.people.is_empty() && self.units.iter().any(|unit| unit.request);
        let mut candidates: Vec<(usize, String)> = Vec::new();
        if self.child_headlines.is_empty() {
            for (index, unit) in self.units.iter().enumerate() {
                let asks = unit.text.ends_with('?');
                // A bracketed note (an attachment's caption, an action) describes a message;
                // the headline says what was said and done.
                let note = unit.text.starts_with('[');
                let eligible = !note && if requests_only { unit.request } else { unit.prose && !asks };
                if !eligible || Some(index) == self.open_question {
                    continue;
                }
                let mut text = trim_request_opener(&unit.text).to_owned();
                trim_clause_end(&mut text);
                // "Can you fix the test?" quoted as "Fix the test": the opener and the question
                // mark go together.
                let asked = text.len() != unit.text.trim_end_matches([',', ';', '–', '—', '-', ' ']).len();
                let text = if asked { text.trim_end_matches('?') } else { text.as_str() };
                let text = capitalize(&truncate_words(text.trim_end_matches('.'), HEADLINE_CLAUSE_CHARS));
                let shown = if self.people.is_empty() || unit.speaker.is_empty() {
                    text
                } else {
                    format!("{}: {text}", unit.speaker)
                };
                candidates.push((index, shown));
            }
        } else {
            candidates.extend(self.child_headlines.iter().cloned().enumerate());
        }
        let mut scored: Vec<(f64, usize, String, Vec<usize>)> = candidates
            .into_iter()
            .filter_map(|(order, text)| {
                let words = self.words_of(&text);
                let topicality: f64 = words
                    .iter()
                    .map(|&id| self.weight(id) * (1.0 + f64::from(self.words[id].units.max(1)).ln()))
                    .sum();
                let score = topicality / (text.split_whitespace().count() as f64 + 2.0).sqrt();
                (score > 0.0).then_some((score, order, text, words))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut chosen: Vec<(usize, String)> = Vec::new();
        let mut used: HashSet<usize> = HashSet::new();
        for (_, order, text, words) in scored {
            let repeated = words.iter().filter(|w| used.contains(w)).count();
            if repeated * 2 >= words.len() || chosen.iter().any(|(_, known)| *known == text) {
                continue;
            }
            used.extend(words);
            chosen.push((order, text));
            if chosen.len() == max {
                break;
            }
        }
        chosen.sort_by_key(|(order, _)| *order);
        let from_units = self.child_headlines.is_empty();
        chosen
            .into_iter()
            .map(|(order, text)| StoryClause { unit: from_units.then_some(order), text })
            .collect()
    }
}
