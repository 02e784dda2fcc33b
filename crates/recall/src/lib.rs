//! strata-recall: the tools an LLM calls to get back what compaction folded away.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
