//! The reads a ranked search is built from: bm25 word ranking and its statistics, vector scans
//! within a window, and rows by id. Recall's `memory_search` fuses them; they are grouped here,
//! behind [`Store::ranking`], rather than on `Store` itself, since no other caller needs them.

use crate::error::Result;
use crate::search::{self, HitId, HitKind, SearchFilter, TextHit};
use crate::store::Store;
use crate::vectors::{self, Scan};

/// The reads of a ranked search over one [`Store`] ([`Store::ranking`]).
#[derive(Clone, Copy, Debug)]
pub struct Ranking<'a> {
    store: &'a Store,
}

impl Store {
    /// The reads a ranked search is built from.
    pub fn ranking(&self) -> Ranking<'_> {
        Ranking { store: self }
    }
}

impl Ranking<'_> {
    /// [`Embeddings::nearest`](crate::Embeddings::nearest) within the filter's persona, session and time range (its kinds and
    /// limit are not used). A small window is searched within (its rows only), so rows outside
    /// it never crowd it out; a large one is filtered after a wider search.
    pub fn nearest_within(
        &self,
        model: &str,
        kind: HitKind,
        filter: &SearchFilter,
        query: &[f32],
        k: usize,
        scan: Scan,
    ) -> Result<Vec<(HitId, f64)>> {
        let nearest = self.store.read(|conn| vectors::nearest(conn, model, kind, filter, query, k, scan))?;
        Ok(nearest.into_iter().map(|(id, distance)| (HitId::new(kind, id), distance)).collect())
    }

    /// How many rows of `kind` hold each word (counted up to `cap`), and about how many rows
    /// there are: the statistics to weigh a bm25 score against the query's best possible one.
    /// Like every ranked read, it reads the word index as it is: rows a bulk writer has not
    /// indexed yet are not counted (see `search_index.rs`).
    pub fn word_frequencies(&self, kind: HitKind, words: &[String], cap: usize) -> Result<(u64, Vec<u64>)> {
        self.store.read(|conn| search::word_frequencies(conn, kind, words, cap))
    }

    /// Ranks rows of `kind` by how well their words match `words` (bm25 over the word index,
    /// which holds each message with its speaker): (id, bm25 score, higher is better), best
    /// first, within the filter's persona, session and time range.
    pub fn rank_words(
        &self,
        kind: HitKind,
        words: &[String],
        filter: &SearchFilter,
    ) -> Result<Vec<(HitId, f64)>> {
        let ranked = self.store.read(|conn| search::rank_words(conn, kind, words, filter))?;
        Ok(ranked.into_iter().map(|(id, score)| (HitId::new(kind, id), score)).collect())
    }

    /// The rows with these ids that belong to `persona`, as unranked hits whose snippet is
    /// the full text: what a ranked id is shown as. Other personas' ids are dropped.
    pub fn hits_by_ids(&self, persona: &str, ids: &[HitId]) -> Result<Vec<TextHit>> {
        self.store.read(|conn| crate::overview::hits_by_ids(conn, persona, ids))
    }
}
