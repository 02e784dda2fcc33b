//! The corpus the recall and scale benches search: sentences of 8 to 39 words drawn from a
//! 40-word vocabulary (every word in about 40% of the messages: the worst case for keyword
//! ranking), each message with a synthetic unit vector so a vector scan costs what it would with
//! real ones. Fixed seeds and a fixed clock: the same call always stores the same rows.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strata_seam::embeddings::EmbeddingSpace;
use strata_seam::{Backend, NewMessage, Role};

/// The default model's id (the vectors are synthetic; their space is the model's).
pub const MODEL: &str = strata_recall::DEFAULT_MODEL;
const DIMS: usize = strata_recall::embedding::MINILM_L6_V2.dimensions;

const PER_SESSION: usize = 1_000;

const WORDS: [&str; 40] = [
    "deploy",
    "the",
    "billing",
    "service",
    "merge",
    "conflict",
    "in",
    "src/main.rs",
    "port",
    "8080",
    "retry",
    "timeout",
    "postgres",
    "migration",
    "failed",
    "fixed",
    "we",
    "decided",
    "to",
    "use",
    "cache",
    "invoice",
    "customer",
    "refund",
    "queue",
    "worker",
    "latency",
    "spike",
    "after",
    "release",
    "rollback",
    "config",
    "staging",
    "production",
    "test",
    "flaky",
    "schema",
    "index",
    "query",
    "slow",
];

fn sentence(rng: &mut ChaCha8Rng) -> String {
    let len = rng.random_range(8..40);
    (0..len).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect::<Vec<_>>().join(" ")
}

/// `count` sentences of the corpus from `seed`.
#[allow(
    dead_code,
    reason = "the recall bench embeds these; the scale bench includes this module for `fill` alone"
)]
pub fn sentences(seed: u64, count: usize) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count).map(|_| sentence(&mut rng)).collect()
}

fn random_unit(rng: &mut ChaCha8Rng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIMS).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Stores `messages` messages of persona `p` in sessions `p-0`, `p-1`, ... of 1,000, plus
/// 10,000 of persona `q` (so a persona filter has work to do), indexes them for search and,
/// with `vectors`, gives every one a synthetic vector in [`MODEL`]'s space. Through the storage
/// seam, so one fixture is built alike on either backend.
pub fn fill(store: &dyn Backend, messages: usize, vectors: bool) {
    let mut random = random_unit;
    fill_with(store, messages, vectors.then_some(&mut random as &mut DrawVector<'_>));
}

/// Draws a message's vector from the fixture's seeded generator.
pub type DrawVector<'a> = dyn FnMut(&mut ChaCha8Rng) -> Vec<f32> + 'a;

#[allow(dead_code, reason = "only the vectors bench draws its own vectors")]
/// [`fill`], each message's vector drawn by `vector` (from the fixture's seeded generator).
pub fn fill_with(store: &dyn Backend, messages: usize, vector: Option<&mut DrawVector<'_>>) {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let start = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap();
    for (persona, sessions) in [("p", messages / PER_SESSION), ("q", 10)] {
        for s in 0..sessions {
            let session = store.session(&format!("{persona}-{s}"), persona).unwrap();
            let batch: Vec<NewMessage> = (0..PER_SESSION)
                .map(|i| {
                    let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                    let mut m = NewMessage::text(role, sentence(&mut rng));
                    m.created_at = start + chrono::Duration::seconds((s * PER_SESSION + i) as i64 * 30);
                    m.token_count = 20;
                    m
                })
                .collect();
            store.append(session.id, &batch).unwrap();
        }
    }
    // Each append indexes its batch before it returns: nothing is left to index.
    if let Some(vector) = vector {
        store.use_space(&EmbeddingSpace { model: MODEL.into(), dimensions: DIMS }).unwrap();
        loop {
            let items = store.backlog(None, None, 5_000).unwrap();
            if items.is_empty() {
                break;
            }
            let pairs: Vec<_> = items.into_iter().map(|item| (item, vec![vector(&mut rng)])).collect();
            store.put_vectors(MODEL, &pairs).unwrap();
        }
    }
}
