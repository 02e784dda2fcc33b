//! The offline summarizer: deterministic extraction, no network, no model.
//!
//! It cannot paraphrase, so it quotes: the headline names the turns' requests and the tools
//! used; the body lists a timeline (one line per turn, or per child node when merging), the
//! sentences that read like decisions and like pitfalls, the files and paths mentioned and the
//! numbers with their context. Everything is cut to the requested token budget, with the
//! sections interleaved so a long timeline cannot crowd out the decisions.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::error::SummarizeError;
use crate::summarizer::{
    BoxFuture, SourceItem, SourceKind, Summarizer, Summary, SummaryRequest, one_line, truncate_chars,
};
use crate::tokens::{Encoding, TokenCounter};

/// The name extractive nodes carry in `summary_nodes.summarizer`.
pub const EXTRACTIVE: &str = "extractive";
/// The name of the flagged digests written while the summarizer is down.
pub const RAW_ARCHIVE: &str = "raw-archive";

const DECISION_MARKERS: &[&str] = &[
    "decided",
    "decision",
    "we'll",
    "we will",
    "let's",
    "going with",
    "go with",
    "chose",
    "agreed",
    "switch to",
    "switched to",
    "instead of",
    "will use",
    "should use",
    "plan is",
    "settled on",
    "prefer",
    "must ",
    "always ",
    "never ",
];
/// Markers of a decision actually taken; the other markers only suggest one. Strong ones are
/// listed first, so a long run of "instead of" sentences cannot crowd out "we decided".
const STRONG_DECISION_MARKERS: &[&str] =
    &["decided", "decision", "agreed", "settled on", "chose", "going with", "prefer", "always ", "never "];
/// How many decision candidates are gathered before the strongest are kept.
const DECISION_CANDIDATES: usize = 64;
const PITFALL_MARKERS: &[&str] = &[
    "error",
    "failed",
    "fails",
    "failing",
    "failure",
    "panic",
    "bug",
    "exception",
    "traceback",
    "doesn't work",
    "does not work",
    "broken",
    "regression",
    "timed out",
    "timeout",
    "denied",
    "not found",
    "cannot",
    "can't",
    "crash",
    "warning",
    "mistake",
    "wrong",
];
/// Reports of success that merely mention a pitfall word.
const NOT_PITFALLS: &[&str] =
    &[" 0 failed", "0 errors", "no errors", "without error", "instead of panicking"];
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
];

/// Per-section caps: enough to be useful, few enough to stay a summary.
const MAX_DECISIONS: usize = 6;
const MAX_PITFALLS: usize = 6;
const MAX_FILES: usize = 16;
const MAX_NUMBERS: usize = 12;
const LINE_CHARS: usize = 160;

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
        let sections = match request.kind {
            SourceKind::Messages => extract_messages(&request.items),
            SourceKind::Summaries => extract_summaries(&request.items),
        };
        self.fit(sections, request.target_tokens)
    }

    /// A flagged digest for when the summarizer is down: the same extraction, labelled so a
    /// later pass knows to re-summarize it.
    pub fn raw_archive(&self, request: &SummaryRequest) -> Summary {
        let mut summary = self.summarize_sync(request);
        summary.headline = one_line(&format!("[raw archive] {}", summary.headline), 240);
        summary
    }

    /// Cuts the extracted sections to `target` tokens.
    fn fit(&self, sections: Sections, target: u32) -> Summary {
        let mut budget = i64::from(target);
        // The headline is what every scaffold lists, so it gets up to half of the budget; it is
        // cut at a word boundary when longer.
        let mut headline = one_line(&sections.headline, 240);
        let mut words: Vec<&str> = sections.headline.split_whitespace().collect();
        while i64::from(self.counter.text(&headline)) > budget / 2 && words.len() > 4 {
            words.truncate(words.len() * 3 / 4);
            headline = format!("{} …", words.join(" ").trim_end_matches([',', ';', ':']));
        }
        budget -= i64::from(self.counter.text(&headline));

        let lists: [(&str, &Vec<String>); 6] = [
            ("Timeline", &sections.timeline),
            ("Decisions", &sections.decisions),
            ("Pitfalls", &sections.pitfalls),
            ("Files", &sections.files),
            ("Numbers", &sections.numbers),
            ("Tools", &sections.tools),
        ];
        // Section headings cost a few tokens each; reserve them up front.
        budget -= 4 * lists.iter().filter(|(_, items)| !items.is_empty()).count() as i64;
        let orders: Vec<Vec<usize>> = lists
            .iter()
            .enumerate()
            .map(
                |(i, (_, items))| if i == 0 { spread_order(items.len()) } else { (0..items.len()).collect() },
            )
            .collect();
        let mut chosen: Vec<Vec<usize>> = vec![Vec::new(); lists.len()];
        let mut cursors = vec![0usize; lists.len()];
        // Round-robin over the sections, each item taken only if it still fits.
        loop {
            let mut progressed = false;
            for (section, (_, items)) in lists.iter().enumerate() {
                while cursors[section] < orders[section].len() {
                    let index = orders[section][cursors[section]];
                    cursors[section] += 1;
                    let cost = i64::from(self.counter.text(&items[index])) + 2;
                    if cost <= budget {
                        budget -= cost;
                        chosen[section].push(index);
                        progressed = true;
                        break;
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        let mut body = String::new();
        for (section, (title, items)) in lists.iter().enumerate() {
            let mut picked = chosen[section].clone();
            if picked.is_empty() {
                continue;
            }
            picked.sort_unstable();
            body.push_str(title);
            body.push_str(":\n");
            if section >= 3 {
                // Files, numbers and tools read best as one comma-separated line.
                let joined: Vec<&str> = picked.iter().map(|&i| items[i].as_str()).collect();
                body.push_str("- ");
                body.push_str(&joined.join(", "));
                body.push('\n');
            } else {
                for index in picked {
                    body.push_str("- ");
                    body.push_str(&items[index]);
                    body.push('\n');
                }
            }
        }
        if body.trim().is_empty() {
            body = format!("- {}", truncate_chars(&sections.fallback, 80));
        }
        Summary { headline, body: body.trim_end().to_owned() }
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
}

/// What was extracted, before fitting to a budget.
#[derive(Debug, Default)]
struct Sections {
    headline: String,
    timeline: Vec<String>,
    decisions: Vec<String>,
    pitfalls: Vec<String>,
    files: Vec<String>,
    numbers: Vec<String>,
    tools: Vec<String>,
    /// Used as the body when nothing else could be extracted.
    fallback: String,
}

/// Indices 0..n in an order that covers the range evenly first (ends, middle, quarters, ...),
/// so a cut timeline still spans the whole chunk.
fn spread_order(n: usize) -> Vec<usize> {
    let mut order = Vec::with_capacity(n);
    if n == 0 {
        return order;
    }
    let mut seen = vec![false; n];
    let mut push = |i: usize, order: &mut Vec<usize>| {
        if !seen[i] {
            seen[i] = true;
            order.push(i);
        }
    };
    push(0, &mut order);
    push(n - 1, &mut order);
    let mut intervals = std::collections::VecDeque::from([(0usize, n - 1)]);
    while let Some((lo, hi)) = intervals.pop_front() {
        if hi <= lo + 1 {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        push(mid, &mut order);
        intervals.push_back((lo, mid));
        intervals.push_back((mid, hi));
    }
    order
}

fn clock(time: DateTime<Utc>) -> String {
    time.format("%m-%d %H:%M").to_string()
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

/// True for a line of source code rather than prose: code says nothing a summary should quote
/// as a decision or a pitfall (an `Error` type in a signature is not an error that happened).
fn looks_like_code(sentence: &str) -> bool {
    let trimmed = sentence.trim();
    const STARTS: &[&str] = &[
        "use ", "pub ", "fn ", "let ", "impl ", "struct ", "enum ", "mod ", "#[", "//", "return ", "if ",
        "} ",
    ];
    const CONTAINS: &[&str] = &["::", "->", "=>", "();", "{", "}", "&mut ", "<String", "Result<"];
    STARTS.iter().any(|start| trimmed.starts_with(start))
        || CONTAINS.iter().any(|part| trimmed.contains(part))
        || trimmed.ends_with(';')
}

/// Keeps the [`MAX_DECISIONS`] strongest candidates, strong markers first, each group in order.
fn keep_strongest_decisions(decisions: &mut Vec<String>) {
    decisions.sort_by_key(|line| !contains_any(&line.to_lowercase(), STRONG_DECISION_MARKERS));
    decisions.truncate(MAX_DECISIONS);
}

fn contains_any(haystack: &str, needles: &[&str]) -> bool {
    needles.iter().any(|needle| haystack.contains(needle))
}

/// Adds `item` unless an equal one (ignoring case) is already there or the list is full.
fn push_unique(list: &mut Vec<String>, seen: &mut HashSet<String>, item: String, cap: usize) {
    if list.len() < cap && !item.is_empty() && seen.insert(item.to_lowercase()) {
        list.push(item);
    }
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

/// Numbers worth keeping, with the words before them: `port 8080`, `pool size of 48`,
/// `version 1.4.2`, `at 02:14`. A number is a word that starts with a digit (or `v` and a
/// digit), so type names like `u64` are not numbers.
fn collect_numbers(text: &str, numbers: &mut Vec<String>, seen: &mut HashSet<String>) {
    const LINKS: &[&str] = &["of", "to", "is", "at", "from", "by", "=", "was", "in", "on"];
    let words: Vec<&str> = text.split_whitespace().map(trim_token).collect();
    for (i, &word) in words.iter().enumerate() {
        let mut chars = word.chars();
        let starts_numeric = match chars.next() {
            Some(c) if c.is_ascii_digit() => true,
            Some('v' | 'V') => chars.next().is_some_and(|c| c.is_ascii_digit()),
            _ => false,
        };
        let digits = word.chars().filter(char::is_ascii_digit).count();
        if !starts_numeric
            || digits == 0
            || (digits == 1 && word.len() == 1)
            || word.chars().count() > 24
            || is_path(word)
        {
            continue;
        }
        let label =
            |j: usize| words.get(j).copied().filter(|w| w.chars().any(char::is_alphabetic) && w.len() <= 20);
        let mut item = match (i.checked_sub(2).and_then(label), i.checked_sub(1).and_then(label)) {
            (Some(before), Some(link)) if LINKS.contains(&link.to_ascii_lowercase().as_str()) => {
                format!("{before} {link} {word}")
            }
            (_, Some(previous)) => format!("{previous} {word}"),
            _ => word.to_owned(),
        };
        // A unit after the number says what it counts: `99 lines`, `45 seconds`, `6 replicas`.
        if let Some(unit) = label(i + 1).filter(|w| w.len() <= 12 && !LINKS.contains(w)) {
            item = format!("{item} {unit}");
        }
        push_unique(numbers, seen, item, MAX_NUMBERS);
        if numbers.len() >= MAX_NUMBERS {
            return;
        }
    }
}

/// Shared extraction of decisions, pitfalls, files and numbers from a text.
#[derive(Default)]
struct Collector {
    sections: Sections,
    seen_decisions: HashSet<String>,
    seen_pitfalls: HashSet<String>,
    seen_files: HashSet<String>,
    seen_numbers: HashSet<String>,
    seen_tools: HashSet<String>,
}

impl Collector {
    fn text(&mut self, text: &str, role: &str) {
        let s = &mut self.sections;
        for sentence in sentences(text) {
            if s.decisions.len() >= DECISION_CANDIDATES && s.pitfalls.len() >= MAX_PITFALLS {
                break;
            }
            // Rendered tool calls (`[calls read_file: path=src/error.rs]`) are not prose.
            if looks_like_code(sentence) || sentence.starts_with("[calls") {
                continue;
            }
            let lower = sentence.to_lowercase();
            // Tool output is data: its errors are pitfalls, but it makes no decisions.
            if role != "tool" && contains_any(&lower, DECISION_MARKERS) {
                push_unique(
                    &mut s.decisions,
                    &mut self.seen_decisions,
                    one_line(sentence, LINE_CHARS),
                    DECISION_CANDIDATES,
                );
            } else if contains_any(&lower, PITFALL_MARKERS) && !contains_any(&lower, NOT_PITFALLS) {
                push_unique(
                    &mut s.pitfalls,
                    &mut self.seen_pitfalls,
                    one_line(sentence, LINE_CHARS),
                    MAX_PITFALLS,
                );
            }
        }
        // `read_file(path=src/a.rs)` and `{"path":"src/a.rs"}` name the path too.
        for raw in text.split(|c: char| c.is_whitespace() || matches!(c, '=' | '"' | '(' | ',')) {
            let word = trim_token(raw);
            if is_path(word) {
                push_unique(&mut s.files, &mut self.seen_files, word.to_owned(), MAX_FILES);
            }
        }
        // Numbers worth remembering are the ones people state; tool output and code are full
        // of counters, line numbers and type names.
        if role != "tool" {
            for sentence in sentences(text).filter(|sentence| !looks_like_code(sentence)) {
                collect_numbers(sentence, &mut s.numbers, &mut self.seen_numbers);
            }
        }
    }

    fn tool(&mut self, name: &str) {
        push_unique(&mut self.sections.tools, &mut self.seen_tools, name.to_owned(), 12);
    }
}

fn extract_messages(items: &[SourceItem]) -> Sections {
    let mut collector = Collector::default();
    // Split into turns: every user message starts one.
    let mut turns: Vec<&[SourceItem]> = Vec::new();
    let mut start = 0;
    for (i, item) in items.iter().enumerate() {
        if item.role == "user" && i > start {
            turns.push(&items[start..i]);
            start = i;
        }
    }
    if start < items.len() {
        turns.push(&items[start..]);
    }
    let mut requests = Vec::new();
    let mut timeline = Vec::new();
    for turn in &turns {
        let request = turn.iter().find(|m| m.role == "user").map(|m| first_sentence(&m.text, 100));
        let reply = turn
            .iter()
            .rev()
            .find(|m| m.role == "assistant" && m.text.chars().any(char::is_alphanumeric))
            .map(|m| first_sentence(&m.text, 100));
        let mut tools: Vec<&str> = Vec::new();
        for item in turn.iter() {
            if item.role == "assistant"
                && let Some(names) = &item.tool
            {
                for name in names.split(", ") {
                    if !tools.contains(&name) {
                        tools.push(name);
                    }
                }
            }
        }
        let mut line = clock(turn[0].time);
        if let Some(request) = &request {
            line.push_str(&format!(" user: \"{request}\""));
            requests.push(request.clone());
        }
        if let Some(reply) = reply {
            line.push_str(&format!(" -> assistant: {reply}"));
        }
        if !tools.is_empty() {
            line.push_str(&format!(" [tools: {}]", tools.join(", ")));
        }
        timeline.push(line);
    }
    for item in items {
        if item.role == "assistant"
            && let Some(names) = &item.tool
        {
            for name in names.split(", ") {
                collector.tool(name);
            }
        }
        collector.text(&item.text, &item.role);
    }
    let mut sections = collector.sections;
    sections.timeline = timeline;
    let mut headline = match requests.as_slice() {
        [] => {
            let first = items.iter().map(|m| first_sentence(&m.text, 100)).find(|s| !s.is_empty());
            format!("Continued work: {}", first.unwrap_or_else(|| "messages without text".into()))
        }
        [only] => format!("User asked \"{only}\""),
        [first, last] => format!("User asked \"{first}\", then \"{last}\""),
        [first, .., last] => {
            format!("User asked \"{first}\" and {} more requests, the last \"{last}\"", requests.len() - 1)
        }
    };
    if !sections.tools.is_empty() {
        let shown: Vec<&str> = sections.tools.iter().take(4).map(String::as_str).collect();
        headline.push_str(&format!("; tools used: {}", shown.join(", ")));
    }
    headline.push('.');
    keep_strongest_decisions(&mut sections.decisions);
    sections.fallback = headline.clone();
    sections.headline = headline;
    sections
}

/// Lines under `Heading:` in a body this summarizer (or a well-behaved LLM) wrote.
fn section_items<'a>(body: &'a str, heading: &str) -> Vec<&'a str> {
    let mut items = Vec::new();
    let mut inside = false;
    for line in body.lines() {
        let trimmed = line.trim();
        if !trimmed.starts_with('-') && trimmed.ends_with(':') {
            inside = trimmed.trim_end_matches(':').eq_ignore_ascii_case(heading);
            continue;
        }
        if inside && let Some(item) = trimmed.strip_prefix("- ") {
            items.push(item);
        }
    }
    items
}

fn extract_summaries(items: &[SourceItem]) -> Sections {
    let mut collector = Collector::default();
    let mut timeline = Vec::new();
    for item in items {
        let (headline, body) = item.text.split_once('\n').unwrap_or((&item.text, ""));
        timeline.push(format!("{} {}", clock(item.time), one_line(headline, LINE_CHARS)));
        let s = &mut collector.sections;
        for line in section_items(body, "Decisions") {
            push_unique(
                &mut s.decisions,
                &mut collector.seen_decisions,
                line.to_owned(),
                DECISION_CANDIDATES,
            );
        }
        for line in section_items(body, "Pitfalls") {
            push_unique(&mut s.pitfalls, &mut collector.seen_pitfalls, line.to_owned(), MAX_PITFALLS);
        }
        for (heading, list, seen, cap) in [
            ("Files", &mut s.files, &mut collector.seen_files, MAX_FILES),
            ("Numbers", &mut s.numbers, &mut collector.seen_numbers, MAX_NUMBERS),
            ("Tools", &mut s.tools, &mut collector.seen_tools, 12),
        ] {
            for line in section_items(body, heading) {
                for part in line.split(", ") {
                    push_unique(list, seen, part.to_owned(), cap);
                }
            }
        }
    }
    let mut sections = collector.sections;
    // The children's headlines quote their requests: the merged headline quotes the first and
    // the last of them, so it does not nest "parts of parts" as levels grow.
    let mut quotes: Vec<&str> = Vec::new();
    for item in items {
        let headline = item.text.lines().next().unwrap_or_default();
        quotes.extend(headline.split('"').skip(1).step_by(2).filter(|q| !q.trim().is_empty()));
    }
    let tools = if sections.tools.is_empty() {
        String::new()
    } else {
        let shown: Vec<&str> = sections.tools.iter().take(4).map(String::as_str).collect();
        format!("; tools used: {}", shown.join(", "))
    };
    sections.headline = match (quotes.as_slice(), items) {
        (_, []) => "No summaries.".into(),
        ([first, .., last], _) => {
            format!("{} summaries of requests from \"{first}\" to \"{last}\"{tools}.", items.len())
        }
        (_, [first, ..]) => {
            let headline = first.text.lines().next().unwrap_or_default();
            format!("{} ({} parts){tools}.", truncate_chars(headline.trim_end_matches('.'), 160), items.len())
        }
    };
    sections.fallback = sections.headline.clone();
    sections.timeline = timeline;
    keep_strongest_decisions(&mut sections.decisions);
    sections
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn item(role: &str, minute: u32, text: &str, tool: Option<&str>) -> SourceItem {
        SourceItem {
            reference: format!("message {minute}"),
            role: role.into(),
            tool: tool.map(Into::into),
            time: Utc.with_ymd_and_hms(2026, 3, 1, 10, minute, 0).unwrap(),
            text: text.into(),
        }
    }

    fn request(items: Vec<SourceItem>, kind: SourceKind, target: u32) -> SummaryRequest {
        SummaryRequest {
            kind,
            level: 0,
            persona: "coder".into(),
            items,
            source_tokens: 2_000,
            target_tokens: target,
        }
    }

    fn transcript() -> Vec<SourceItem> {
        vec![
            item("user", 0, "Deploy the billing service to staging. It listens on port 8080.", None),
            item("assistant", 1, "Running the deploy script.", Some("bash")),
            item(
                "tool",
                2,
                "Error: migration 0042 failed: relation \"invoices\" does not exist",
                Some("bash"),
            ),
            item(
                "assistant",
                3,
                "The migration failed because invoices is missing. We decided to run scripts/migrate.sh first.",
                None,
            ),
            item("user", 10, "Good. Also bump the version in Cargo.toml to 1.4.2 please.", None),
            item("assistant", 11, "Done: Cargo.toml now says version 1.4.2 and src/main.rs reads it.", None),
        ]
    }

    #[test]
    fn leaf_summaries_are_honest_and_structured() {
        let summarizer = ExtractiveSummarizer::default();
        let summary = summarizer.summarize_sync(&request(transcript(), SourceKind::Messages, 400));
        assert_eq!(
            summary.headline,
            "User asked \"Deploy the billing service to staging.\", then \"Good.\"; tools used: bash."
        );
        let body = &summary.body;
        assert!(
            body.starts_with("Timeline:\n- 03-01 10:00 user: \"Deploy the billing service to staging.\""),
            "{body}"
        );
        assert!(
            body.contains("Decisions:\n- The migration failed because invoices is missing. We decided")
                || body.contains("We decided to run scripts/migrate.sh first."),
            "{body}"
        );
        assert!(body.contains("Pitfalls:\n- Error: migration 0042 failed"), "{body}");
        assert!(
            body.contains("scripts/migrate.sh")
                && body.contains("Cargo.toml")
                && body.contains("src/main.rs"),
            "{body}"
        );
        assert!(body.contains("port 8080") && body.contains("1.4.2"), "{body}");
    }

    #[test]
    fn output_fits_the_target_and_is_deterministic() {
        let summarizer = ExtractiveSummarizer::default();
        let mut items = Vec::new();
        for i in 0..40 {
            items.extend(transcript().into_iter().map(|mut m| {
                m.text = format!("{} (round {i}, file src/mod_{i}.rs)", m.text);
                m
            }));
        }
        for target in [48, 120, 400] {
            let req = request(items.clone(), SourceKind::Messages, target);
            let a = summarizer.summarize_sync(&req);
            let counter = TokenCounter::new(Encoding::Cl100kBase);
            let tokens = counter.text(&a.headline) + counter.text(&a.body);
            assert!(tokens <= target, "{tokens} > {target}: {a:?}");
            assert!(!a.body.trim().is_empty());
            assert_eq!(a, summarizer.summarize_sync(&req));
        }
    }

    #[test]
    fn merges_keep_child_headlines_and_sections() {
        let summarizer = ExtractiveSummarizer::default();
        let leaf = summarizer.summarize_sync(&request(transcript(), SourceKind::Messages, 400));
        let child = |minute| item("summary", minute, &format!("{}\n{}", leaf.headline, leaf.body), None);
        let merged =
            summarizer.summarize_sync(&request(vec![child(0), child(30)], SourceKind::Summaries, 300));
        assert_eq!(
            merged.headline,
            "2 summaries of requests from \"Deploy the billing service to staging.\" to \"Good.\"; tools used: bash."
        );
        assert!(merged.body.contains("Timeline:\n- 03-01 10:00 User asked"), "{}", merged.body);
        assert!(merged.body.contains("scripts/migrate.sh"), "{}", merged.body);
        assert!(merged.body.contains("Pitfalls:"), "{}", merged.body);
    }

    #[test]
    fn code_is_not_prose_and_strong_decisions_come_first() {
        let mut items = vec![item(
            "tool",
            0,
            "use crate::error::Error;\npub fn load(input: &Request) -> Result<Response, Error> {\n}\ntest result: ok. 12 passed; 0 failed",
            Some("read_file"),
        )];
        for minute in 1..12 {
            items.push(item("assistant", minute, "It returns a typed error instead of panicking now.", None));
        }
        items.push(item(
            "user",
            20,
            "We decided to keep Postgres 16. The pool size is 48 connections.",
            None,
        ));
        let summary =
            ExtractiveSummarizer::default().summarize_sync(&request(items, SourceKind::Messages, 400));
        let decisions = section_items(&summary.body, "Decisions");
        assert_eq!(decisions.first(), Some(&"We decided to keep Postgres 16."), "{}", summary.body);
        assert!(section_items(&summary.body, "Pitfalls").is_empty(), "{}", summary.body);
        let numbers = section_items(&summary.body, "Numbers").join(", ");
        assert!(numbers.contains("48 connections") && !numbers.contains("u64"), "{numbers}");
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

    #[test]
    fn spread_order_covers_the_ends_first() {
        assert_eq!(spread_order(5), vec![0, 4, 2, 1, 3]);
        assert_eq!(spread_order(1), vec![0]);
        assert!(spread_order(0).is_empty());
    }
}
