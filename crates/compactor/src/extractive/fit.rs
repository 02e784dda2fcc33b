//! Budget fitting: the headline, the body in its sections, and the loop that fits both within
//! the target, counted exactly.

use chrono::Datelike;

use super::chunk::{Chunk, Section, StoryClause, Unit};
use super::segment::{PEOPLE_SEPARATOR, trim_clause_end, truncate_words};
use super::select::Pick;
use crate::summarizer::{Summary, truncate_chars};
use crate::tokens::TokenCounter;

/// Most files listed.
const MAX_FILES: usize = 12;
/// Most clauses a headline quotes besides the decision.
const HEADLINE_CLAUSES: usize = 2;

impl Chunk {
    /// The people, what happened (the story's clauses) and the decision taken, if any, in at
    /// most `max_chars`.
    pub(super) fn headline(
        &self,
        story: &[StoryClause],
        decision: Option<&Unit>,
        max_chars: usize,
    ) -> String {
        let mut headline = String::new();
        if !self.people.is_empty() {
            let shown: Vec<&str> = self.people.iter().take(4).map(String::as_str).collect();
            headline.push_str(&shown.join(", "));
            headline.push_str(PEOPLE_SEPARATOR);
        }
        let decision =
            decision.map(|unit| truncate_words(unit.text.trim_end_matches(['.', '!', '-', '–', ' ']), 90));
        let mut clauses: Vec<&str> = story
            .iter()
            .map(|clause| clause.text.as_str())
            .filter(|clause| {
                decision.as_ref().is_none_or(|decision| {
                    !decision.contains(clause.split_once(": ").map_or(*clause, |(_, text)| text))
                })
            })
            .collect();
        if let Some(decision) = &decision {
            clauses.push(decision);
        }
        // Whole clauses, in order, as many as fit: a clause cut to its first words ("It's a …")
        // costs tokens and says nothing. Only a first clause too long on its own is cut.
        let room = max_chars.saturating_sub(1);
        let mut used = headline.chars().count();
        let mut quoted = 0;
        for clause in &clauses {
            let separator = if quoted == 0 { 0 } else { 2 };
            let length = clause.chars().count() + separator;
            if used + length <= room {
                if quoted > 0 {
                    headline.push_str("; ");
                }
                headline.push_str(clause);
                used += length;
                quoted += 1;
            }
        }
        if quoted == 0 {
            headline.push_str(clauses.first().copied().unwrap_or(&truncate_words(&self.fallback, 100)));
        }
        let headline = truncate_words(&headline, room);
        if headline.ends_with('…') {
            return headline;
        }
        if headline.ends_with(['?', '!']) {
            return headline;
        }
        format!("{}.", headline.trim_end_matches(['.', ',', ';', ':', ' ']))
    }

    /// [`Chunk::headline`] cut until it is at most `max_tokens`, counted exactly.
    fn fit_headline(
        &self,
        story: &[StoryClause],
        decision: Option<&Unit>,
        max_tokens: f64,
        counter: &TokenCounter,
    ) -> String {
        let mut max_chars = (max_tokens * 4.0) as usize;
        let mut headline = self.headline(story, decision, max_chars);
        while f64::from(counter.text(&headline)) > max_tokens && max_chars > 12 {
            max_chars = max_chars * 3 / 4;
            headline = self.headline(story, decision, max_chars);
        }
        headline
    }

    /// The body: picked units in time order under their sections, then the files.
    pub(super) fn body(&self, picks: &[Pick], files: usize) -> String {
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
            let mut last_speaker: Option<&str> = None;
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
                // One speaker's picks of one day share a line: the prefix is said once.
                if last_day == Some(unit.day) && last_speaker == Some(unit.speaker.as_str()) {
                    body.pop();
                    body.push_str(if body.ends_with(['.', '!', '?', '…']) { " " } else { "; " });
                    body.push_str(&text);
                    body.push('\n');
                    index = next;
                    continue;
                }
                last_speaker = Some(unit.speaker.as_str());
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
    pub(super) fn ranked_files(&self) -> Vec<String> {
        let mut files: Vec<(usize, &(String, u32))> = self.files.iter().enumerate().collect();
        files.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
        files.into_iter().map(|(_, (path, _))| path.clone()).take(MAX_FILES).collect()
    }

    /// Selects and renders within `target` tokens, counted exactly.
    pub(super) fn summarize(
        &self,
        counter: &TokenCounter,
        target: u32,
        vectors: Option<&[Vec<f32>]>,
    ) -> Summary {
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
        let aim = target_f * 0.94;
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
        let headline_max = (target_f / 4.0).clamp(8.0, 40.0);
        let story = self.story(HEADLINE_CLAUSES);
        let decisions = self.units.iter().any(|unit| unit.decision);
        // The headline without the decision is counted exactly; a decision, if the body picks
        // one, may join it up to the headline's share.
        let topic = self.fit_headline(&story, None, headline_max, counter);
        let topic_tokens = f64::from(counter.text(&topic));
        let headline_cost =
            (topic_tokens + if decisions { 24.0 } else { 0.0 }).min(headline_max.max(topic_tokens));
        let headings = 4.0 * 2.0;
        let budget = (aim - headline_cost - file_cost - headings).max(0.0);

        let mut selection = self.selection(ratio, vectors);
        // The headline's words are in the summary already: the body's budget goes to others.
        let topic_words = self.words_of(&topic);
        selection.cover(&topic_words);
        // A unit the headline quotes whole is said: not picked again, and with vectors its
        // restatements count as said too.
        for clause in &story {
            if let Some(unit) = clause.unit
                && topic.contains(clause.text.trim_end_matches('…').trim_end())
            {
                selection.quoted(unit);
            }
        }
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
            // The decision joins the headline only when the words the body left to it stay.
            let headline = match decision {
                None => topic.clone(),
                Some(_) => {
                    let with_decision = self.fit_headline(&story, decision, headline_max, counter);
                    let kept = self.words_of(&with_decision);
                    if topic_words.iter().all(|word| kept.binary_search(word).is_ok()) {
                        with_decision
                    } else {
                        topic.clone()
                    }
                }
            };
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
