//! The seam's errors, under the path this crate's modules use. SQLite's own errors become
//! them through strata-seam's `rusqlite` feature.

pub(crate) use strata_seam::{Error, Missing, Result};
