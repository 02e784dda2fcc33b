//! Embeddings as a backend keeps them: the one space, the rows waiting for a vector, and how
//! a k-nearest query scans.

use crate::error::{Error, Result};
use crate::search::HitId;

/// Most chunks (vectors) stored per row; text past them is not embedded.
pub const MAX_CHUNKS: usize = 32;

/// A row still waiting for its vector.
#[derive(Clone, Debug, PartialEq)]
pub struct BacklogItem {
    /// The row: its table and its id there.
    pub id: HitId,
    /// The persona it belongs to (the vector's partition).
    pub persona: String,
    /// The text to embed.
    pub text: String,
    /// The role of a message (its embedding policy depends on it); `None` for summaries and
    /// memories.
    pub message_role: Option<crate::types::Role>,
}

/// The model the vector tables hold vectors of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmbeddingSpace {
    /// The model's id (for example `all-MiniLM-L6-v2`).
    pub model: String,
    /// Dimensions of its vectors.
    pub dimensions: usize,
}

impl EmbeddingSpace {
    /// The rules of a space, whatever stores it: a named model, 8 to 8,192 dimensions in
    /// whole bytes of the 1-bit vectors (a multiple of 8).
    pub fn validate(&self) -> Result<()> {
        if self.model.is_empty()
            || !(1..=8192).contains(&self.dimensions)
            || !self.dimensions.is_multiple_of(8)
        {
            return Err(Error::invalid(
                "embedding space",
                format!("model {:?} with {} dimensions", self.model, self.dimensions),
            ));
        }
        Ok(())
    }
}

/// How a k-nearest query scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Scan {
    /// Every float vector of the persona, by sqlite-vec: exact.
    #[default]
    Exact,
    /// The 1-bit vectors first (32x less to read; hamming distance, in strata), then exact
    /// cosine distances for the best `candidates` chunks, read from the float vectors.
    Quantized {
        /// Chunks kept from the bit scan for exact re-scoring.
        candidates: usize,
    },
}
