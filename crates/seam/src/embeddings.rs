//! Embeddings as the store keeps them: the [`EmbeddingSpace`] (the one model and dimensions
//! the vectors are of), the rows still waiting for a vector ([`BacklogItem`]), and how many
//! chunks one long text is embedded in at most ([`MAX_CHUNKS`]). How a k-nearest query scans
//! is [`search::Scan`](crate::search::Scan).

pub use crate::vectors::{BacklogItem, EmbeddingSpace, MAX_CHUNKS};
