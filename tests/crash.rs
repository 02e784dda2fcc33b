//! kill -9 at any point leaves a consistent database with nothing lost (DESIGN.md §6).

use std::process::Stdio;

use strata_seam::Role;
use strata_synth::{TranscriptSpec, generate};

use crate::util::{Strata, assert_consistent, kill_when};

/// Writes a generated conversation as JSON Lines and returns (path, message count).
pub fn transcript_file(strata: &Strata, messages: usize) -> (std::path::PathBuf, usize) {
    let transcript =
        generate(&TranscriptSpec { min_messages: messages, min_chars: 0, ..TranscriptSpec::default() });
    (strata.file("week.jsonl", &transcript.to_jsonl()), transcript.messages.len())
}

#[test]
fn kill_during_ingest_writes_all_or_nothing() {
    let strata = Strata::new();
    strata.run(&["init"]).success();
    let (file, count) = transcript_file(&strata, 3_000);
    let mut child = strata
        .command()
        .args(["ingest", file.to_str().unwrap(), "--session", "week"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill once the transaction is spilling pages into the WAL, i.e. mid-write.
    let wal = strata.db().with_extension("db-wal");
    let killed =
        kill_when(&mut child, || std::fs::metadata(&wal).map(|m| m.len() > 256 * 1024).unwrap_or(false));
    let store = strata.backend();
    let stored = store.stats().unwrap().messages as usize;
    assert!(killed, "ingest finished before it could be interrupted");
    assert!(stored == 0 || stored == count, "half-written ingest: {stored} of {count}");
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "again"]).success();
    assert_consistent(&*store, "again", count);
}

#[test]
fn kill_during_compaction_leaves_a_consistent_forest() {
    let strata = Strata::new();
    let (file, count) = transcript_file(&strata, 1_500);
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "week"]).success();
    let store = strata.backend();
    let mut kills = 0;
    // Kill at a few different depths of the work: after 1, 10 and 25 nodes exist.
    for threshold in [1u64, 10, 25] {
        let mut child = strata
            .command()
            .args(["compact", "--session", "week"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let killed = kill_when(&mut child, || {
            store.stats().map(|s| s.nodes_per_level.iter().sum::<u64>() >= threshold).unwrap_or(false)
        });
        kills += usize::from(killed);
        assert_consistent(&*store, "week", count);
    }
    assert!(kills >= 1, "at least one compaction was interrupted");
    // A fresh run finishes the job from where the killed ones stopped.
    strata.run(&["compact", "--session", "week"]).success();
    assert_consistent(&*store, "week", count);
    let session = store.find_session("week").unwrap().unwrap();
    let first_user =
        store.messages(session.id, 0..=i64::MAX).unwrap().into_iter().find(|m| m.role == Role::User).unwrap();
    assert!(store.message(first_user.id).unwrap().content.len() > 10, "content intact");
    assert!(store.stats().unwrap().compacted_messages > (count / 2) as u64);
}
