//! strata's metrics in the Prometheus text exposition format (`strata metrics`,
//! [`crate::Engine::metrics`]).
//!
//! Two sources. What the database holds ([`strata_seam::stats::StoreMetrics`]) is the same for every
//! process: nodes written (compactions) and the tokens they folded, LLM calls and their usage,
//! stored tool results, the embedding backlog, the file's size. What only happens in a process
//! is counted by its engine ([`Counters`]): every tool call (also the ones no conversation
//! stores, an MCP client's), and the recalled block's hits. A bot exports
//! [`crate::Engine::metrics`]; `strata metrics` shows the database's totals (its own process
//! counters are zero).
//!
//! Names follow Prometheus' conventions: `strata_` prefix, `_total` for counters, units in
//! the name (`_tokens`, `_seconds`, `_bytes`); README.md "Metrics" lists them.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use strata_seam::stats::StoreMetrics;

/// The counters of one process's engine.
#[derive(Debug, Default)]
pub struct Counters {
    tools: Mutex<BTreeMap<String, ToolCounts>>,
    recalled_blocks: AtomicU64,
    recalled_hits: AtomicU64,
}

/// One tool's calls in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolCounts {
    /// Calls.
    pub calls: u64,
    /// Calls whose answer found something (a positive `count` or non-empty `results`).
    pub hits: u64,
    /// Calls answered with an error.
    pub errors: u64,
}

/// A copy of [`Counters`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CountersSnapshot {
    /// Per tool.
    pub tools: BTreeMap<String, ToolCounts>,
    /// Contexts assembled with a recalled block search.
    pub recalled_blocks: u64,
    /// Hits the recalled blocks showed.
    pub recalled_hits: u64,
}

/// Whether a tool's answer found something: the same rule as the store's count of stored
/// results.
fn is_hit(answer: &Value) -> bool {
    answer.get("count").and_then(Value::as_u64).is_some_and(|n| n > 0)
        || ["results", "memories"]
            .iter()
            .any(|key| answer.get(*key).and_then(Value::as_array).is_some_and(|a| !a.is_empty()))
}

impl Counters {
    /// Counts one tool call and its answer.
    pub fn tool_call(&self, tool: &str, answer: &Value) {
        let mut tools = self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let counts = tools.entry(tool.to_owned()).or_default();
        counts.calls += 1;
        counts.hits += u64::from(is_hit(answer));
        counts.errors += u64::from(answer.get("error").is_some_and(Value::is_object));
    }

    /// Counts one recalled block's search and the hits it showed.
    pub fn recalled(&self, hits: usize) {
        self.recalled_blocks.fetch_add(1, Ordering::Relaxed);
        self.recalled_hits.fetch_add(hits as u64, Ordering::Relaxed);
    }

    /// A copy of the counts so far.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            tools: self.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone(),
            recalled_blocks: self.recalled_blocks.load(Ordering::Relaxed),
            recalled_hits: self.recalled_hits.load(Ordering::Relaxed),
        }
    }
}

/// A label value escaped as the exposition format asks (backslash, quote, line feed).
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", label(v))).collect();
        let labels = if labels.is_empty() { String::new() } else { format!("{{{}}}", labels.join(",")) };
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }
}

/// The metrics as Prometheus text: the database's totals, then the process's counters.
pub fn render(store: &StoreMetrics, process: &CountersSnapshot) -> String {
    let mut out = Exposition(String::new());
    out.family("strata_messages", "gauge", "Messages stored.");
    out.sample("strata_messages", &[], store.messages);
    out.family("strata_compacted_messages", "gauge", "Messages covered by a Level-0 summary.");
    out.sample("strata_compacted_messages", &[], store.compacted_messages);
    out.family("strata_sessions", "gauge", "Sessions stored.");
    out.sample("strata_sessions", &[], store.sessions);
    out.family("strata_memories", "gauge", "Agent memories stored.");
    out.sample("strata_memories", &[], store.memories);
    out.family(
        "strata_compactions_total",
        "counter",
        "Summary nodes written (one per compaction step), by summarizer and level.",
    );
    for node in &store.nodes {
        let level = node.level.to_string();
        out.sample(
            "strata_compactions_total",
            &[("summarizer", &node.summarizer), ("level", &level)],
            node.nodes,
        );
    }
    out.family(
        "strata_compaction_tokens_before_total",
        "counter",
        "Tokens folded into summaries (their sources), by summarizer.",
    );
    out.family(
        "strata_compaction_tokens_after_total",
        "counter",
        "Tokens of the summaries written, by summarizer.",
    );
    let mut by_summarizer: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for node in &store.nodes {
        let entry = by_summarizer.entry(&node.summarizer).or_default();
        entry.0 += node.source_tokens;
        entry.1 += node.tokens;
    }
    for (summarizer, (before, after)) in &by_summarizer {
        out.sample("strata_compaction_tokens_before_total", &[("summarizer", summarizer)], before);
        out.sample("strata_compaction_tokens_after_total", &[("summarizer", summarizer)], after);
    }
    out.family(
        "strata_raw_archives",
        "gauge",
        "Summary nodes that are raw archives (the summarizer was down).",
    );
    let raw: u64 =
        store.nodes.iter().filter(|node| node.summarizer == "raw-archive").map(|node| node.nodes).sum();
    out.sample("strata_raw_archives", &[], raw);
    out.family(
        "strata_summary_rejections_total",
        "counter",
        "Summaries the quality gate refused, by summarizer and reason.",
    );
    for (summarizer, reason, count) in &store.rejections {
        out.sample(
            "strata_summary_rejections_total",
            &[("summarizer", summarizer), ("reason", reason)],
            count,
        );
    }
    out.family(
        "strata_llm_calls_total",
        "counter",
        "Calls to an LLM (summaries, chat), by purpose, caller and model.",
    );
    out.family("strata_llm_call_failures_total", "counter", "Calls to an LLM that got no usable answer.");
    out.family("strata_llm_prompt_tokens_total", "counter", "Prompt tokens the server reported.");
    out.family("strata_llm_completion_tokens_total", "counter", "Completion tokens the server reported.");
    out.family("strata_llm_call_seconds_total", "counter", "Time spent in calls to an LLM.");
    for call in &store.calls {
        let labels = [("purpose", call.purpose.as_str()), ("caller", &call.caller), ("model", &call.model)];
        out.sample("strata_llm_calls_total", &labels, call.calls);
        out.sample("strata_llm_call_failures_total", &labels, call.failures);
        out.sample("strata_llm_prompt_tokens_total", &labels, call.prompt_tokens);
        out.sample("strata_llm_completion_tokens_total", &labels, call.completion_tokens);
        out.sample("strata_llm_call_seconds_total", &labels, call.millis as f64 / 1000.0);
    }
    out.family(
        "strata_stored_tool_results_total",
        "counter",
        "Tool results stored in conversations, by tool.",
    );
    out.family(
        "strata_stored_tool_hits_total",
        "counter",
        "Stored tool results that found something, by tool.",
    );
    for tool in &store.tools {
        out.sample("strata_stored_tool_results_total", &[("tool", &tool.tool)], tool.calls);
        out.sample("strata_stored_tool_hits_total", &[("tool", &tool.tool)], tool.hits);
    }
    out.family("strata_tool_calls_total", "counter", "Tool calls run by this process's engine, by tool.");
    out.family("strata_tool_hits_total", "counter", "Of those, calls whose answer found something.");
    out.family("strata_tool_errors_total", "counter", "Of those, calls answered with an error.");
    for (tool, counts) in &process.tools {
        out.sample("strata_tool_calls_total", &[("tool", tool)], counts.calls);
        out.sample("strata_tool_hits_total", &[("tool", tool)], counts.hits);
        out.sample("strata_tool_errors_total", &[("tool", tool)], counts.errors);
    }
    out.family(
        "strata_proactive_recall_searches_total",
        "counter",
        "Recalled-block searches run by this process.",
    );
    out.sample("strata_proactive_recall_searches_total", &[], process.recalled_blocks);
    out.family(
        "strata_proactive_recall_hits_total",
        "counter",
        "Hits the recalled blocks of this process showed.",
    );
    out.sample("strata_proactive_recall_hits_total", &[], process.recalled_hits);
    out.family("strata_embedding_backlog", "gauge", "Rows waiting for a vector.");
    out.sample("strata_embedding_backlog", &[], store.embedding_backlog);
    out.family("strata_forgets_total", "counter", "Forgets done (strata forget).");
    out.sample("strata_forgets_total", &[], store.forgets);
    out.family("strata_database_bytes", "gauge", "Size of the database file and of its write-ahead log.");
    out.sample("strata_database_bytes", &[("file", "db")], store.file_bytes);
    out.sample("strata_database_bytes", &[("file", "wal")], store.wal_bytes);
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_family_and_escapes_labels() {
        let counters = Counters::default();
        counters.tool_call("memory_grep", &serde_json::json!({"count": 2, "results": [1, 2]}));
        counters.tool_call("memory_grep", &serde_json::json!({"error": {"kind": "invalid"}}));
        counters.recalled(3);
        let store = StoreMetrics {
            nodes: vec![strata_seam::stats::NodeTotals {
                summarizer: "a\"b".into(),
                level: 0,
                nodes: 4,
                source_tokens: 4000,
                tokens: 400,
            }],
            ..StoreMetrics::default()
        };
        let text = render(&store, &counters.snapshot());
        assert!(text.contains("strata_compactions_total{summarizer=\"a\\\"b\",level=\"0\"} 4"), "{text}");
        assert!(text.contains("strata_compaction_tokens_before_total{summarizer=\"a\\\"b\"} 4000"));
        assert!(text.contains("strata_tool_calls_total{tool=\"memory_grep\"} 2"));
        assert!(text.contains("strata_tool_hits_total{tool=\"memory_grep\"} 1"));
        assert!(text.contains("strata_tool_errors_total{tool=\"memory_grep\"} 1"));
        assert!(text.contains("strata_proactive_recall_hits_total 3"));
        // Every sample belongs to a family announced before it.
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_owned());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(typed.contains(name), "{name} has no TYPE line");
            }
        }
    }
}
