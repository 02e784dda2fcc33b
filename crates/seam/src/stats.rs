//! What the work cost and what the database holds: the counts of [`Maintenance::stats`], the
//! totals behind `strata metrics` ([`StoreMetrics`]), and the LLM calls recorded for usage
//! accounting ([`LlmCall`], summed per day in [`UsageDay`]).
//!
//! [`Maintenance::stats`]: crate::Maintenance::stats

pub use crate::metrics::{CallTotals, NodeTotals, RowTotals, StoreMetrics, ToolTotals};
pub use crate::metrics::{RejectionCount, Stats, SummarizerStats};
pub use crate::usage::{LlmCall, UsageDay};
