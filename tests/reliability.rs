//! The reliability suite: kill -9 trials across ingest, compact and embed, and processes that
//! write, compact and read one file at once. Deterministic seeds; bounded in time.
//!
//! `STRATA_KILL_TRIALS` multiplies the number of kill trials (default 1: 20 imports, 20
//! compactions and 10 embedding runs killed, 50 in all).

use std::process::{Child, Stdio};
use std::time::Instant;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_store::Store;
use strata_synth::{TranscriptSpec, generate};

use crate::util::{Strata, assert_consistent, kill_when};

/// `base` trials, times `STRATA_KILL_TRIALS`.
fn trials(base: usize) -> usize {
    base * std::env::var("STRATA_KILL_TRIALS").ok().and_then(|n| n.parse().ok()).unwrap_or(1)
}

/// A generated conversation as JSON Lines in `name`; its message count.
fn transcript(strata: &Strata, name: &str, seed: u64, messages: usize) -> (std::path::PathBuf, usize) {
    let transcript =
        generate(&TranscriptSpec { seed, min_messages: messages, min_chars: 0, ..TranscriptSpec::default() });
    (strata.file(name, &transcript.to_jsonl()), transcript.messages.len())
}

fn spawn(strata: &Strata, args: &[&str]) -> Child {
    strata.command().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

#[track_caller]
fn assert_healthy(store: &Store) {
    let report = store.doctor(false).unwrap();
    assert!(report.healthy(), "{report:#?}");
}

fn messages_in(store: &Store, key: &str) -> usize {
    store.find_session(key).unwrap().map_or(0, |s| store.all_messages(s.id).unwrap().len())
}

#[test]
fn kill_nine_during_ingest_then_an_exact_rerun() {
    let strata = Strata::new();
    strata.run(&["init"]).success();
    let store = Store::open(strata.db()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0x1D6E57);
    // How long one import takes here, so the kills land anywhere inside one.
    let (file, _) = transcript(&strata, "baseline.jsonl", 999, 1_200);
    let started = Instant::now();
    strata.run(&["ingest", file.to_str().unwrap(), "--session", "baseline"]).success();
    let took = started.elapsed();
    let (n, mut kills) = (trials(20), 0);
    for trial in 0..n {
        let key = format!("import-{trial}");
        let (file, count) = transcript(&strata, &format!("{key}.jsonl"), trial as u64, 1_200);
        let file = file.to_str().unwrap();
        let after = took.mul_f64(rng.random_range(0.05..1.0));
        let mut child = spawn(&strata, &["ingest", file, "--session", &key]);
        let started = Instant::now();
        kills += usize::from(kill_when(&mut child, || started.elapsed() >= after));
        assert_healthy(&store);
        let stored = messages_in(&store, &key);
        assert!(stored == 0 || stored == count, "trial {trial}: half an import, {stored} of {count}");
        // The user re-runs the command, twice: exactly the file's messages, whatever the kill hit.
        strata.run(&["ingest", file, "--session", &key]).success();
        strata.run(&["ingest", file, "--session", &key]).success();
        assert_consistent(&store, &key, count);
    }
    eprintln!("ingest: {n} trials, {kills} killed mid-run");
    assert!(kills * 2 >= n, "most trials must interrupt the import: {kills} of {n}");
}

#[test]
fn kill_nine_during_compaction_then_a_rerun_finishes() {
    let strata = Strata::new();
    let store = Store::open(strata.db()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0xC0_4AC7);
    let (n, mut kills) = (trials(20), 0);
    for trial in 0..n {
        let key = format!("week-{trial}");
        let (file, count) = transcript(&strata, "week.jsonl", 100 + trial as u64, 500);
        strata.run(&["ingest", file.to_str().unwrap(), "--session", &key]).success();
        let session = store.find_session(&key).unwrap().unwrap();
        let threshold = rng.random_range(1..8usize);
        // What is killed is the writing, not the selection: the lexical summarizer keeps 20
        // trials of 500 messages within the suite's time (the model takes about a second per
        // chunk and would make each trial a minute).
        let compact = || {
            let mut command = strata.command();
            command.env("STRATA_SUMMARIZER_SENTENCE_VECTORS", "false").args(["compact", "--session", &key]);
            command
        };
        let mut child = compact().stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        kills += usize::from(kill_when(&mut child, || {
            store.nodes(session.id).map(|nodes| nodes.len() >= threshold).unwrap_or(false)
        }));
        assert_healthy(&store);
        assert_consistent(&store, &key, count);
        assert!(compact().status().unwrap().success());
        assert_healthy(&store);
        assert_consistent(&store, &key, count);
        assert!(store.stats().unwrap().compacted_messages > 0);
    }
    eprintln!("compact: {n} trials, {kills} killed mid-run");
    assert!(kills * 2 >= n, "most trials must interrupt compaction: {kills} of {n}");
}

#[test]
fn kill_nine_during_embedding_then_every_row_has_its_vectors_once() {
    let strata = Strata::new();
    let store = Store::open(strata.db()).unwrap();
    let (file, count) = transcript(&strata, "chat.jsonl", 7, 40);
    let file = file.to_str().unwrap();
    // The same conversation in each session, so each session ends with the same vectors.
    strata.run(&["ingest", file, "--session", "control"]).success();
    strata.run(&["embed"]).success();
    let per_session = store.embeddings().counts().unwrap().messages;
    assert!(per_session >= count as u64);
    let mut rng = ChaCha8Rng::seed_from_u64(0xE3BED);
    let (n, mut kills) = (trials(10), 0);
    for trial in 0..n {
        let key = format!("embed-{trial}");
        strata.run(&["ingest", file, "--session", &key]).success();
        let waiting = store.embeddings().backlog_count(None, None).unwrap();
        let stop_at = waiting - rng.random_range(1..waiting);
        let mut child = spawn(&strata, &["embed"]);
        kills += usize::from(kill_when(&mut child, || {
            store.embeddings().backlog_count(None, None).map(|left| left <= stop_at).unwrap_or(false)
        }));
        assert_healthy(&store);
        strata.run(&["embed"]).success();
        assert_eq!(store.embeddings().backlog_count(None, None).unwrap(), 0);
        assert_eq!(
            store.embeddings().counts().unwrap().messages,
            per_session * (trial as u64 + 2),
            "trial {trial}: every message embedded exactly once"
        );
    }
    eprintln!("embed: {n} trials, {kills} killed mid-run");
    assert!(kills * 2 >= n, "most trials must interrupt embedding: {kills} of {n}");
}

/// Two importers, a compactor and two readers on one file at once: every command succeeds,
/// no reader ever sees a lock error, and nothing is lost.
#[test]
fn writers_compaction_and_readers_at_once() {
    let strata = Strata::new();
    let (seed_file, seeded) = transcript(&strata, "seed.jsonl", 1, 800);
    strata.run(&["ingest", seed_file.to_str().unwrap(), "--session", "busy"]).success();
    let files: Vec<(std::path::PathBuf, usize)> =
        (0..6).map(|i| transcript(&strata, &format!("w{i}.jsonl"), 200 + i, 400)).collect();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let commands: Vec<_> = files
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == w)
                .map(|(i, (file, _))| {
                    let mut command = strata.command();
                    command.args(["ingest", file.to_str().unwrap(), "--session", &format!("writer-{i}")]);
                    command
                })
                .collect();
            std::thread::spawn(move || {
                commands.into_iter().map(|mut c| c.output().unwrap()).collect::<Vec<_>>()
            })
        })
        .collect();
    let compactor = {
        let commands: Vec<_> = (0..4)
            .map(|_| {
                let mut command = strata.command();
                command.args(["compact", "--session", "busy"]);
                command
            })
            .collect();
        std::thread::spawn(move || commands.into_iter().map(|mut c| c.output().unwrap()).collect::<Vec<_>>())
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let commands: Vec<_> = (0..15)
                .map(|i| {
                    let mut command = strata.command();
                    match (r + i) % 3 {
                        0 => command.args(["grep", "the", "--limit", "5"]),
                        1 => command.args(["stats"]),
                        _ => command.args(["tree", "--session", "busy"]),
                    };
                    command
                })
                .collect();
            std::thread::spawn(move || {
                commands.into_iter().map(|mut c| c.output().unwrap()).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut reads = 0;
    for reader in readers {
        for output in reader.join().unwrap() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success() && !stderr.contains("locked"), "a reader failed: {stderr}");
            reads += 1;
        }
    }
    for output in writers.into_iter().flat_map(|w| w.join().unwrap()).chain(compactor.join().unwrap()) {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let store = Store::open(strata.db()).unwrap();
    assert_healthy(&store);
    assert_consistent(&store, "busy", seeded);
    for (i, (_, count)) in files.iter().enumerate() {
        assert_eq!(messages_in(&store, &format!("writer-{i}")), *count);
    }
    eprintln!("concurrent: 2 writers x 3 imports, 4 compactions, {reads} reads, no lock error");
}
