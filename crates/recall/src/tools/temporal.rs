//! Time-aware ranking: what a question asks about time, and how well a candidate answers it.
//!
//! A question that asks *when* ("When did the export job last fail?", "what year", "how long
//! ago") is answered by a message that says when: one that names a day, a month, a year or a
//! time relative to its own ("yesterday", "last week", "two months ago"). A question that
//! names a date ("what did we decide on 7 May 2023", "in March 2024") is answered by what was
//! said then, or in the days after (a message tells of a day after it). Both are read from
//! the words alone, without a model, in English; [`TimeQuestion::relevance`] gives a
//! candidate 1 when it fits one of them and 0 otherwise, and `memory_search` adds
//! `time_weight` times that to its fused score.

use chrono::{DateTime, Duration, NaiveDate, Utc};

/// Months by name, January first.
const MONTHS: [&str; 12] = [
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
];

/// Words that place what is said in time on their own.
const TIME_WORDS: [&str; 15] = [
    "yesterday",
    "today",
    "tonight",
    "tomorrow",
    "ago",
    "weekend",
    "recently",
    "lately",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// Units of time: after `last`, `next`, `this`, `past` or a number they place what is said.
const UNITS: [&str; 19] = [
    "day",
    "days",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "night",
    "morning",
    "afternoon",
    "evening",
    "summer",
    "winter",
    "spring",
    "autumn",
    "season",
    "decade",
    "hours",
];

/// Words before a unit that make it a time ("last week", "two months", "a few days").
const UNIT_LEADS: [&str; 18] = [
    "last", "next", "this", "past", "few", "couple", "a", "one", "two", "three", "four", "five", "six",
    "several", "every", "each", "that", "same",
];

/// Lowercase word tokens (letters and digits).
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The month a word names, in full or by its first three letters ("Sep").
fn month_of(word: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|month| *month == word || (word.len() == 3 && month.starts_with(word)))
        .map(|index| index as u32 + 1)
}

/// The year a word names: four digits from 1900 to 2199.
fn year_of(word: &str) -> Option<i32> {
    if word.len() != 4 || !word.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    word.parse().ok().filter(|year| (1900..=2199).contains(year))
}

/// The day of a month a word names: 1 to 31, with or without `st`, `nd`, `rd`, `th`.
fn day_of(word: &str) -> Option<u32> {
    let digits = word.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &word[digits.len()..];
    let day: u32 = digits.parse().ok()?;
    ((1..=31).contains(&day) && matches!(suffix, "" | "st" | "nd" | "rd" | "th")).then_some(day)
}

/// Whether `text` places something in time: a date, a month, a year, a weekday, or a time
/// relative to when it was said. "May" counts only beside a number ("May 7", "7 May", "May
/// 2023"), since it is also a verb.
pub(crate) fn mentions_time(text: &str) -> bool {
    let words = tokens(text);
    words.iter().enumerate().any(|(at, word)| {
        let before = at.checked_sub(1).map(|i| words[i].as_str());
        let after = words.get(at + 1).map(String::as_str);
        let beside_number = before.is_some_and(|w| day_of(w).is_some())
            || after.is_some_and(|w| day_of(w).is_some() || year_of(w).is_some());
        TIME_WORDS.contains(&word.as_str())
            || year_of(word).is_some()
            || (word != "may" && MONTHS.contains(&word.as_str()))
            || (word == "may" && beside_number)
            || (UNITS.contains(&word.as_str())
                && before.is_some_and(|w| UNIT_LEADS.contains(&w) || w.chars().all(|c| c.is_ascii_digit())))
    })
}

/// What a question asks about time.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TimeQuestion {
    /// It asks when (or how long ago): a message that says when answers it.
    pub asks_when: bool,
    /// The periods it names (a day, a month, a year), each as `[start, end)`.
    pub periods: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

/// Days after a named period in which what is said may still tell of it ("yesterday", "last
/// week").
const TELLS_OF_DAYS: i64 = 8;

impl TimeQuestion {
    /// Reads `question`: whether it asks when (its first word is "when", or it asks "what
    /// date", "which year", "how long ago", ...) and the dates it names.
    pub(crate) fn of(question: &str) -> TimeQuestion {
        let words = tokens(question);
        let pair = |first: &[&str], second: &[&str]| {
            words.windows(2).any(|w| first.contains(&w[0].as_str()) && second.contains(&w[1].as_str()))
        };
        let asks_when = words.first().is_some_and(|w| w == "when")
            || pair(&["what", "which"], &["date", "day", "year", "month", "week", "time", "weekend"])
            || pair(&["how"], &["long", "recently"])
            || pair(&["since"], &["when"]);
        TimeQuestion { asks_when, periods: periods(question) }
    }

    /// Whether the question says anything about time.
    pub(crate) fn is_temporal(&self) -> bool {
        self.asks_when || !self.periods.is_empty()
    }

    /// 1 when a candidate with `text`, said at `said_at` (when known), fits the question's time
    /// (it says when, for a question asking when; it was said in or just after a period the
    /// question names), 0 otherwise.
    pub(crate) fn relevance(&self, text: &str, said_at: Option<DateTime<Utc>>) -> f64 {
        let in_period = said_at.is_some_and(|said_at| {
            self.periods
                .iter()
                .any(|(start, end)| *start <= said_at && said_at < *end + Duration::days(TELLS_OF_DAYS))
        });
        if in_period || (self.asks_when && mentions_time(text)) { 1.0 } else { 0.0 }
    }
}

/// The days, months and years `text` names: "7 May 2023", "May 7, 2023", "7th of May 2023",
/// "May 2023", "2023" (a year alone only when no day or month of it was named).
fn periods(text: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let words = tokens(text);
    let mut found = Vec::new();
    let mut dated_years = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let Some(month) = month_of(word) else { continue };
        let get =
            |offset: isize| at.checked_add_signed(offset).and_then(|i| words.get(i)).map(String::as_str);
        // A year within the next three words ("May 7, 2023", "May 2023").
        let year = (1..=3).find_map(|n| get(n).and_then(year_of));
        let Some(year) = year else { continue };
        let day = get(1).and_then(day_of).filter(|_| get(1).and_then(year_of).is_none()).or_else(|| {
            get(-1)
                .and_then(day_of)
                .or_else(|| (get(-1) == Some("of")).then(|| get(-2).and_then(day_of)).flatten())
        });
        let period = match day.and_then(|day| NaiveDate::from_ymd_opt(year, month, day)) {
            Some(date) => (date, date + Duration::days(1)),
            None => {
                let Some(first) = NaiveDate::from_ymd_opt(year, month, 1) else { continue };
                let next = if month == 12 {
                    NaiveDate::from_ymd_opt(year + 1, 1, 1)
                } else {
                    NaiveDate::from_ymd_opt(year, month + 1, 1)
                };
                let Some(next) = next else { continue };
                (first, next)
            }
        };
        dated_years.push(year);
        found.push(period);
    }
    for word in &words {
        let Some(year) = year_of(word).filter(|year| !dated_years.contains(year)) else { continue };
        let (Some(first), Some(next)) =
            (NaiveDate::from_ymd_opt(year, 1, 1), NaiveDate::from_ymd_opt(year + 1, 1, 1))
        else {
            continue;
        };
        found.push((first, next));
    }
    found.sort();
    found.dedup();
    found
        .into_iter()
        .map(|(start, end)| {
            let midnight = |date: NaiveDate| date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc();
            (midnight(start), midnight(end))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> DateTime<Utc> {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap().and_hms_opt(12, 0, 0).unwrap().and_utc()
    }

    #[test]
    fn messages_that_say_when_are_told_from_those_that_do_not() {
        for said in [
            "I went to a support group yesterday and it was so powerful.",
            "We moved the invoices to Postgres last week.",
            "Two months ago the export job started failing.",
            "The release is planned for May 7.",
            "Back in 2019 we still deployed by hand.",
            "See you on Friday!",
        ] {
            assert!(mentions_time(said), "{said}");
        }
        for said in [
            "I may go to the pottery class, it looks fun.",
            "The rate limiter lives in services/gateway.",
            "Thanks, that sounds great!",
            "Port 8443 is open; 12 replicas use 40 connections each.",
        ] {
            assert!(!mentions_time(said), "{said}");
        }
    }

    #[test]
    fn questions_asking_when_or_naming_dates_are_read() {
        assert!(TimeQuestion::of("When did Caroline go to the support group?").asks_when);
        assert!(TimeQuestion::of("In which year did the team move to Berlin?").asks_when);
        assert!(TimeQuestion::of("how long ago was the migration").asks_when);
        assert!(!TimeQuestion::of("What did Caroline research?").is_temporal());
        assert!(!TimeQuestion::of("Remind me what we said about the rebase").is_temporal());

        let named = TimeQuestion::of("Who did Maria have dinner with on May 3, 2023?");
        assert!(!named.asks_when);
        assert_eq!(
            named.periods,
            vec![(day("2023-05-03") - Duration::hours(12), day("2023-05-04") - Duration::hours(12))]
        );
        assert_eq!(TimeQuestion::of("what happened on 7th of May 2023").periods.len(), 1);
        let month = &TimeQuestion::of("what did we decide in March 2024").periods;
        assert_eq!(
            month,
            &vec![(day("2024-03-01") - Duration::hours(12), day("2024-04-01") - Duration::hours(12))]
        );
        let year = &TimeQuestion::of("where did she travel in 2022?").periods;
        assert_eq!(year.len(), 1);
        assert_eq!(year[0].0, day("2022-01-01") - Duration::hours(12));
    }

    #[test]
    fn a_candidate_fits_by_what_it_says_or_when_it_was_said() {
        let when = TimeQuestion::of("When did the export job fail?");
        assert_eq!(when.relevance("It failed yesterday at noon.", Some(day("2024-01-10"))), 1.0);
        assert_eq!(when.relevance("It failed because the disk was full.", Some(day("2024-01-10"))), 0.0);

        let named = TimeQuestion::of("What did Maria cook on 3 May 2023?");
        // Said that day, or in the days after (telling of it), fits; before it or long after does not.
        assert_eq!(named.relevance("Pasta!", Some(day("2023-05-03"))), 1.0);
        assert_eq!(named.relevance("I made pasta yesterday", Some(day("2023-05-04"))), 1.0);
        assert_eq!(named.relevance("Pasta!", Some(day("2023-05-02"))), 0.0);
        assert_eq!(named.relevance("Pasta!", Some(day("2023-06-20"))), 0.0);
    }
}
