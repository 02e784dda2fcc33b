//! Integration tests of strata-compactor over real, file-backed stores.

mod cycle;
mod faults;
mod injection;
mod invariants;
mod openai;
mod protected;
mod scale;
mod untrusted;
mod util;
