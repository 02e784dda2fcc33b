//! Realistic vectors for the benches' fixtures: the real model's vectors of the demo week's
//! texts, each fixture vector one of them plus a share of another and noise (cosine about 0.8
//! to its base), so neighbourhoods are as crowded as in a real archive. Uniform random vectors
//! in 384 dimensions have no neighbourhoods at all: an approximate index walks most of its
//! graph on them and finds a third of the true nearest, which no model's vectors make it do.

use std::time::Instant;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use strata_recall::Embedder;

use super::appends;

/// The held-out texts queries are made from.
pub const QUERIES: usize = 40;

/// Texts of the demo's generated week (user and assistant text, tool results), cut to 600
/// characters (the model reads 256 tokens), in order.
pub fn week_texts() -> Vec<String> {
    appends::first_messages(2_500)
        .into_iter()
        .filter(|message| message.content.len() >= 40)
        .map(|message| strata_seam::text::truncate_chars(&message.content, 600))
        .collect()
}

/// The texts every fixture vector is drawn around, and the held-out query texts.
pub fn bases_and_queries() -> (Vec<String>, Vec<String>) {
    let mut bases = week_texts();
    let queries = bases.split_off(bases.len() - QUERIES);
    (bases, queries)
}

/// The model's vectors of the base texts.
pub fn embed_bases(embedder: &Embedder, bases: &[String]) -> Vec<Vec<f32>> {
    let started = Instant::now();
    let refs: Vec<&str> = bases.iter().map(String::as_str).collect();
    let vectors = embedder.embed_sorted(&refs, 32).unwrap();
    eprintln!("embedded {} base texts in {:.1} s", vectors.len(), started.elapsed().as_secs_f64());
    vectors
}

/// One fixture vector: a base, plus up to half of another, plus noise of norm about 0.75,
/// normalized.
pub fn around(bases: &[Vec<f32>], rng: &mut ChaCha8Rng) -> Vec<f32> {
    let a = &bases[rng.random_range(0..bases.len())];
    let b = &bases[rng.random_range(0..bases.len())];
    let share = rng.random_range(0.0f32..0.5);
    // Uniform noise of standard deviation 0.038 per dimension (sqrt(3) * 0.038 = 0.066).
    let mut v: Vec<f32> =
        a.iter().zip(b).map(|(x, y)| x + share * y + rng.random_range(-0.066f32..0.066)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}
