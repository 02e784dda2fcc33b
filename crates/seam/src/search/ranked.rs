//! What `memory_search` asks a backend for and gets back: [`CandidateQuery`] and
//! [`Candidates`].

use std::collections::HashMap;

use super::{HitKind, SearchFilter, TextHit};
use crate::types::NodeId;
use crate::vectors::EmbeddingSpace;
use crate::vectors::Scan;

/// What a ranked search asks for ([`Search::candidates`](crate::Search::candidates)).
#[derive(Clone, Debug)]
pub struct CandidateQuery<'a> {
    /// The persona, session and time range searched, the kinds, and how many candidates each
    /// side keeps per kind (`limit`).
    pub filter: SearchFilter,
    /// The query's words for bm25 (its stop words already left out).
    pub words: &'a [String],
    /// The embedding model's id and the query's vector; `None` ranks by words alone.
    pub vector: Option<(&'a str, &'a [f32])>,
    /// How the vector side scans.
    pub scan: Scan,
    /// Word counts are exact up to this many rows.
    pub frequency_cap: usize,
}

/// How many of the persona's rows of a kind there are (about) and how many of them hold each
/// of the query's words (up to the cap), in the order of [`CandidateQuery::words`] (blank words
/// and those past the 32nd left out). Another persona's rows are never counted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WordStatistics {
    /// Rows of the kind.
    pub rows: u64,
    /// Rows holding each word.
    pub frequencies: Vec<u64>,
}

/// Everything a ranked search needs, read in one snapshot.
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// The semantic side: each kind's nearest rows with the cosine distance of their nearest
    /// chunk; each hit's snippet is its whole text.
    pub semantic: Vec<(TextHit, f64)>,
    /// The keyword side: each kind's bm25 matches with their score (higher is better); each
    /// hit's snippet is its whole text.
    pub keyword: Vec<(TextHit, f64)>,
    /// The word statistics of each kind the keyword side found something in.
    pub words: HashMap<HitKind, WordStatistics>,
    /// The first and last seq of each summary among the candidates.
    pub spans: HashMap<NodeId, (i64, i64)>,
    /// The embedding space of the stored vectors; `None` before anything was embedded.
    pub space: Option<EmbeddingSpace>,
    /// Rows of the persona (and the session, if the filter has one) waiting for a vector.
    pub waiting: u64,
}
