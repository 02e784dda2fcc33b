//! Integration tests of strata-recall, with the real model (run `scripts/fetch-embed-assets.sh`
//! first; `make test` does). One binary, so the model is loaded once.

mod recall {
    pub mod util;

    mod dispatch;
    mod fusion;
    mod grep;
    mod history;
    mod in_context;
    mod isolation;
    mod memory;
    mod pipeline;
    mod proactive;
    mod search;
    mod untrusted;
}
