//! The recalled block's search (`proactive`): each hit is shown from the search's one read of
//! its candidates, with the speaker, text and place the message has.

use std::collections::HashSet;

use strata_recall::{RecallConfig, proactive};
use strata_seam::Role;

use super::util::*;
use strata_seam::Conversations;

#[test]
fn a_recalled_hit_carries_its_speaker_text_and_place_from_the_search_read() {
    let fx = fixture();
    let session = fx.store.session("staging-notes", "p").unwrap();
    let mut named = message(
        Role::User,
        "The staging database listens on port 6543 behind pgbouncer.",
        at("2026-03-01T09:00:00Z"),
    );
    named.name = Some("Caroline".into());
    let plain = message(
        Role::Assistant,
        "Noted: pgbouncer fronts the staging database on port 6543.",
        at("2026-03-01T09:01:00Z"),
    );
    fx.store.append(session.id, &[named, plain]).unwrap();
    embed_all(&fx.store);

    let request = "which port does the staging pgbouncer listen on";
    let config = RecallConfig::default();
    let found = proactive(&fx.store, "p", &config, Some(&embedder()), request, &HashSet::new()).unwrap();

    assert_eq!(found.hits.len(), 2, "{found:?}");
    for hit in &found.hits {
        let (message, of) = fx.store.message_of("p", hit.message_id).unwrap();
        let speaker = message.name.clone().unwrap_or_else(|| message.role.as_str().to_owned());
        assert_eq!(
            (hit.speaker.as_str(), hit.text.as_str(), hit.seq, hit.timestamp, hit.session.as_str()),
            (speaker.as_str(), message.content.as_str(), message.seq, message.created_at, of.key.as_str())
        );
    }
    assert!(found.hits.iter().any(|hit| hit.speaker == "Caroline"), "{found:?}");
}
