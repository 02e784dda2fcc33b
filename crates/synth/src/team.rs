//! A second, different generator: weeks of a small team's group chat (four people, no tools,
//! no code), with on-call hand-overs, releases, support tickets and small talk.
//!
//! It exists so that measurements are not only taken on the text the demo's generator writes
//! (and strata's heuristics were first tuned on): recall and summaries must work on a
//! conversation of another shape too. Its distractors share words with the planted facts
//! ("test environment", "password reset", "rotate the on-call") so that keyword overlap alone
//! does not find them.

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_seam::{NewMessage, Role};

use super::{PlantedFact, Transcript};

/// What to generate.
#[derive(Clone, Debug)]
pub struct TeamChatSpec {
    /// The seed; the same seed gives the same chat.
    pub seed: u64,
    /// Stop after this many messages.
    pub messages: usize,
    /// Time of the first message.
    pub start: DateTime<Utc>,
}

impl Default for TeamChatSpec {
    /// 1,500 messages from Monday 2026-03-02 09:00 UTC, about six weeks of chat.
    fn default() -> TeamChatSpec {
        TeamChatSpec {
            seed: 7,
            messages: 1_500,
            start: Utc.with_ymd_and_hms(2026, 3, 2, 9, 0, 0).single().expect("valid date"),
        }
    }
}

const PEOPLE: [&str; 4] = ["Priya", "Tomas", "Maya", "Jonas"];

/// (kind, speaker, text, keyword query, paraphrase question), planted in this order.
const FACTS: [(&str, &str, &str, &str, &str); 5] = [
    (
        "secret",
        "Priya",
        "Reminder for everyone: the staging database password rotates every 45 days, so pull it from the vault instead of pasting it into scripts.",
        "rotates every 45 days",
        "how often do the credentials for the test environment change",
    ),
    (
        "decision",
        "Maya",
        "Decision from the planning call: we ship v2.3 on Friday the 20th, once QA signs off on the billing fixes.",
        "v2.3",
        "when is the next version going out?",
    ),
    (
        "preference",
        "Jonas",
        "Small request: I'd rather get written async updates than meetings before 10am, my mornings are for deep work.",
        "async updates",
        "how does Jonas like to be kept in the loop?",
    ),
    (
        "number",
        "Tomas",
        "Support backlog is down to 312 open tickets from 450 last week, mostly thanks to the new macros.",
        "312 open tickets",
        "how big is the customer support queue now?",
    ),
    (
        "plan",
        "Maya",
        "The team offsite is booked: Lisbon, 12 to 14 May, and Priya found a hotel near the river.",
        "Lisbon",
        "where are we going for the team trip?",
    ),
];

const TEMPLATES: [&str; 24] = [
    "Morning all, I'm on call today. Pager was quiet overnight except one disk alert on {host}.",
    "Handing over on-call to {other}: two open incidents, both mitigated, notes are in the doc.",
    "Can someone review my change to the {area} retry logic? It's small.",
    "The test environment is slow again, {host} is at 90% CPU.",
    "I changed the test for the {area} flow, it was flaky on Mondays.",
    "We got another spike of password reset tickets after the newsletter went out.",
    "Let's rotate the on-call schedule so {other} gets a quiet week after the release.",
    "Lunch at the ramen place at 12:30? {other} is paying, apparently.",
    "Customer {customer} is asking about the {area} export again, can someone reply by EOD?",
    "Deploy of {area} went fine, error rate flat, latency p95 {latency} ms.",
    "I'm out tomorrow afternoon for a dentist appointment, ping me on my phone if it's urgent.",
    "The dashboard for {area} shows {count} failed jobs since yesterday, looking into it.",
    "Reminder: retro is on Thursday, please add your notes to the board.",
    "Who owns the {area} runbook? It still mentions the old cluster.",
    "Nice work on the {area} migration, zero downtime!",
    "The vendor call moved to 3pm, same link.",
    "I'll pair with {other} on the {area} bug after standup.",
    "Heads up, the CI runners will be down for maintenance Saturday morning.",
    "Has anyone seen the new invoice template? Finance wants feedback by Friday.",
    "{customer} renewed for another year, sales is happy.",
    "Coffee machine on floor 3 is broken again, bring your own.",
    "Standup notes: {area} done, {other_area} in review, nothing blocked.",
    "Quick poll: do we keep the Tuesday demo slot or move it to Wednesday?",
    "The certificate for {host} expires next month, I've put a ticket in.",
];
const HOSTS: [&str; 5] = ["db-staging-2", "api-eu-1", "worker-7", "cache-3", "gateway-2"];
const AREAS: [&str; 8] =
    ["billing", "login", "search", "export", "notifications", "reporting", "sync", "onboarding"];
const CUSTOMERS: [&str; 5] = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"];

/// Generates the team chat: every message is a `user` message with the speaker as `name`.
pub fn generate_team_chat(spec: &TeamChatSpec) -> Transcript {
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut clock = spec.start;
    let mut messages = Vec::with_capacity(spec.messages);
    let mut facts = Vec::new();
    // Facts are spread over the first half, where compaction folds them away.
    let spacing = (spec.messages / 2 / (FACTS.len() + 1)).max(1);
    while messages.len() < spec.messages {
        let index = messages.len();
        let fact = (index > 0 && index % spacing == 0).then(|| FACTS.get(index / spacing - 1)).flatten();
        let (speaker, content) = match fact {
            Some(&(kind, speaker, text, grep, paraphrase)) => {
                facts.push(PlantedFact { kind, text, grep, paraphrase, index });
                (speaker, text.to_owned())
            }
            None => {
                let pick =
                    |rng: &mut ChaCha8Rng, items: &[&'static str]| items[rng.random_range(0..items.len())];
                let speaker = pick(&mut rng, &PEOPLE);
                let other = pick(&mut rng, &PEOPLE);
                let text = pick(&mut rng, &TEMPLATES)
                    .replace("{host}", pick(&mut rng, &HOSTS))
                    .replace("{other_area}", pick(&mut rng, &AREAS))
                    .replace("{area}", pick(&mut rng, &AREAS))
                    .replace("{customer}", pick(&mut rng, &CUSTOMERS))
                    .replace("{other}", other)
                    .replace("{latency}", &rng.random_range(80..400).to_string())
                    .replace("{count}", &rng.random_range(2..60).to_string());
                (speaker, text)
            }
        };
        clock += Duration::minutes(rng.random_range(1..40));
        // Nights are quiet: after 18:00 the next message comes the next morning.
        if clock.time() > chrono::NaiveTime::from_hms_opt(18, 0, 0).expect("valid time") {
            clock =
                (clock + Duration::days(1)).date_naive().and_hms_opt(9, 0, 0).expect("valid time").and_utc();
        }
        let mut message = NewMessage::text(Role::User, content);
        message.name = Some(speaker.to_owned());
        message.created_at = clock;
        messages.push(message);
    }
    Transcript { messages, facts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_planted_in_the_first_half_and_time_moves_forward() {
        let chat = generate_team_chat(&TeamChatSpec { messages: 600, ..TeamChatSpec::default() });
        assert_eq!(chat.messages.len(), 600);
        assert_eq!(chat.facts.len(), FACTS.len());
        for fact in &chat.facts {
            assert!(fact.index < 300 && chat.messages[fact.index].content == fact.text, "{fact:?}");
        }
        assert!(chat.messages.windows(2).all(|w| w[0].created_at < w[1].created_at));
        assert!(chat.messages.iter().all(|m| m.name.is_some() && m.role == Role::User));
        let again = generate_team_chat(&TeamChatSpec { messages: 600, ..TeamChatSpec::default() });
        assert_eq!(chat.messages, again.messages);
    }
}
