//! strata-compactor: keeps a chat's context inside the model's window.
//!
//! It counts tokens exactly ([`TokenCounter`]), folds old turns into Level-0 summary nodes,
//! merges them up the levels, and assembles the context handed to the model.
//!
//! ```
//! use strata_compactor::{Encoding, TokenCounter};
//!
//! let counter = TokenCounter::for_model("gpt-4o-mini");
//! assert_eq!(counter.encoding(), Encoding::O200kBase);
//! assert_eq!(counter.text("hello world"), 2);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod tokens;

pub use crate::tokens::{Encoding, TOKENS_PER_MESSAGE, TOKENS_PER_NAME, TOKENS_PER_REPLY, TokenCounter};
