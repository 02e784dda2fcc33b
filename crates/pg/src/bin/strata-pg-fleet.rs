//! One bot process of a fleet, for the fleet test (`tests/fleet.rs`): appends, compacts under
//! the lease, embeds and searches one PostgreSQL database alongside its peers, then prints
//! what it did as one line of `key=value` pairs.
//!
//! `strata-pg-fleet URL WORKER OPERATIONS SESSIONS`
//!
//! While it holds a session's compaction lease it also holds a row of `fleet_leases` (which the
//! test creates) keyed by the session: a second holder at the same moment fails to insert it,
//! which is counted as an overlap. The vectors it stores are derived from the text's bytes:
//! they exercise where the store puts vectors under concurrency, not a model.

use std::process::ExitCode;
use std::time::Duration;

use strata_pg::PgStore;
use strata_seam::embeddings::{BacklogItem, EmbeddingSpace};
use strata_seam::search::{CandidateQuery, HitKind, Scan, SearchFilter, TextQuery};
use strata_seam::{Conversations, Forest, Search, Vectors};
use strata_seam::{Level, NewMessage, NewSummary, Role, SessionId};

const MODEL: &str = "fleet-bytes-8d";
const PERSONA: &str = "fleet";

#[derive(Debug, Default)]
struct Tally {
    appended: usize,
    compactions: usize,
    merges: usize,
    lease_busy: usize,
    overlaps: usize,
    embedded: usize,
    searches: usize,
    errors: usize,
}

fn vector(text: &str) -> Vec<f32> {
    let mut vector = vec![0.1f32; 8];
    for (at, byte) in text.bytes().enumerate() {
        vector[at % 8] += f32::from(byte) / 255.0;
    }
    vector
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, worker, operations, sessions] = args.as_slice() else {
        eprintln!("usage: strata-pg-fleet URL WORKER OPERATIONS SESSIONS");
        return ExitCode::from(2);
    };
    let (Ok(worker), Ok(operations), Ok(sessions)) =
        (worker.parse::<usize>(), operations.parse::<usize>(), sessions.parse::<usize>())
    else {
        eprintln!("WORKER, OPERATIONS and SESSIONS are numbers");
        return ExitCode::from(2);
    };
    match run(url, worker, operations, sessions.max(1)) {
        Ok(tally) => {
            println!(
                "appended={} compactions={} merges={} lease_busy={} overlaps={} embedded={} searches={} errors={}",
                tally.appended,
                tally.compactions,
                tally.merges,
                tally.lease_busy,
                tally.overlaps,
                tally.embedded,
                tally.searches,
                tally.errors
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("worker {worker}: {}", strata_seam::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str, worker: usize, operations: usize, sessions: usize) -> Result<Tally, strata_seam::Error> {
    let store = PgStore::open_with_pool_size(url, 3)?;
    let mut marks = postgres::Client::connect(url, postgres::NoTls)
        .map_err(|source| strata_seam::Error::Backend { backend: "postgres", source: Box::new(source) })?;
    store.use_space(&EmbeddingSpace { model: MODEL.into(), dimensions: 8 })?;
    let mut tally = Tally::default();
    let mut previous: Option<(SessionId, Vec<NewMessage>)> = None;
    for op in 0..operations {
        let session = store.session(&format!("fleet-{}", op % sessions), PERSONA)?;
        let batch: Vec<NewMessage> = (0..3)
            .map(|j| NewMessage {
                external_id: Some(format!("w{worker}-op{op}-m{j}")),
                token_count: 5,
                ..NewMessage::text(
                    if j % 2 == 0 { Role::User } else { Role::Assistant },
                    format!("worker {worker} says {op}.{j}"),
                )
            })
            .collect();
        store.append(session.id, &batch)?;
        tally.appended += batch.len();
        // A retry of the batch before: appends are idempotent by key, so it stores nothing.
        if let Some((retry_session, retry)) = previous.replace((session.id, batch)) {
            store.append(retry_session, &retry)?;
        }
        match op % 4 {
            0 => compact(&store, &mut marks, session.id, &mut tally)?,
            1 => {
                let backlog = store.backlog(None, None, 16)?;
                let items: Vec<(BacklogItem, Vec<Vec<f32>>)> =
                    backlog.into_iter().map(|item| (item.clone(), vec![vector(&item.text)])).collect();
                tally.embedded += store.put_vectors(MODEL, &items)?;
            }
            _ => {
                let filter = SearchFilter::persona(PERSONA);
                store.grep(&TextQuery::parse(&format!("worker {worker}"))?, &filter)?;
                let words = vec!["worker".to_owned()];
                let query_vector = vector("worker says");
                store.candidates(&CandidateQuery {
                    filter: SearchFilter { kinds: vec![HitKind::Message, HitKind::Summary], ..filter },
                    words: &words,
                    vector: Some((MODEL, &query_vector)),
                    scan: Scan::Exact,
                    frequency_cap: 1000,
                })?;
                tally.searches += 1;
            }
        }
    }
    Ok(tally)
}

/// One compaction step of a session under its lease: a Level-0 node over the oldest uncovered
/// messages (up to 8), and a merge of the two oldest Level-0 roots once there are four.
fn compact(
    store: &PgStore,
    marks: &mut postgres::Client,
    session: SessionId,
    tally: &mut Tally,
) -> Result<(), strata_seam::Error> {
    let Some(lease) = store.compaction_lease(session)? else {
        tally.lease_busy += 1;
        return Ok(());
    };
    if marks.execute("INSERT INTO fleet_leases(session) VALUES ($1)", &[&session.0]).is_err() {
        tally.overlaps += 1;
        return Ok(());
    }
    // Widen the window in which an overlapping holder would be caught.
    std::thread::sleep(Duration::from_millis(5));
    let uncovered: Vec<i64> = store
        .messages(session, 0..=i64::MAX)?
        .into_iter()
        .filter(|message| message.summary_id.is_none())
        .map(|message| message.seq)
        .collect();
    if let Some(&first) = uncovered.first() {
        let mut last = first;
        while last - first < 7 && uncovered.contains(&(last + 1)) {
            last += 1;
        }
        let summary = NewSummary {
            headline: format!("messages {first} to {last}"),
            body: format!("- the fleet said {first}..{last}"),
            token_count: 6,
            summarizer: "extractive".into(),
            memory_updates: Vec::new(),
        };
        match store.insert_leaf(session, first, last, &summary) {
            Ok(_) => tally.compactions += 1,
            Err(error) => {
                eprintln!("compaction failed under the lease: {error}");
                tally.errors += 1;
            }
        }
        let roots = store.roots(session, Some(Level::LEAF))?;
        if roots.len() >= 4 {
            let merged = NewSummary { headline: "two nodes".into(), ..summary };
            match store.merge(&[roots[0].id, roots[1].id], &merged) {
                Ok(_) => tally.merges += 1,
                Err(error) => {
                    eprintln!("merge failed under the lease: {error}");
                    tally.errors += 1;
                }
            }
        }
    }
    marks
        .execute("DELETE FROM fleet_leases WHERE session = $1", &[&session.0])
        .map_err(|source| strata_seam::Error::Backend { backend: "postgres", source: Box::new(source) })?;
    drop(lease);
    Ok(())
}
