//! End-to-end tests of the `strata` binary and the engine.

mod util;

mod cli_store;
