//! What the work cost and what the database holds: the counts of [`Backend::stats`], the
//! totals behind `strata metrics` ([`StoreMetrics`]), and the LLM calls recorded for usage
//! accounting ([`LlmCall`], summed per day in [`UsageDay`]).
//!
//! [`Backend::stats`]: crate::Backend::stats

pub use crate::metrics::{CallTotals, NodeTotals, RowTotals, StoreMetrics, ToolTotals};
pub use crate::store::{RejectionCount, Stats, SummarizerStats};
pub use crate::usage::{LlmCall, UsageDay};
