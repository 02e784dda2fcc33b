//! `strata export` and `strata config`.

use strata::{Config, Engine};
use strata_seam::Category;
use strata_seam::memories::{MemoryWrite, Writer};
use strata_synth::{TranscriptSpec, generate};

use crate::util::Strata;

/// A compacted conversation of persona `coder`, plus one memory per category.
fn compacted(strata: &Strata) -> usize {
    let mut config = Config::default();
    config.compactor.context_window_tokens = 8_000;
    config.compactor.reserve_tokens = 1_000;
    config.compactor.tail_tokens = 2_000;
    config.compactor.leaf_min_tokens = 2_000;
    config.compactor.leaf_chunk_tokens = 2_000;
    config.compactor.context_consolidation_k = 2;
    // The tool definitions take their share of the 8k window too.
    config.compactor.scaffold_body_tokens = 2_000;
    let engine = Engine::open(strata.db(), config).unwrap();
    let session = engine.session("week", "coder").unwrap();
    let mut messages =
        generate(&TranscriptSpec { min_messages: 300, min_chars: 0, ..TranscriptSpec::default() }).messages;
    for message in &mut messages {
        engine.compactor().counter().count_new(message);
    }
    engine.store().append(session.id(), &messages).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for _ in 0..50 {
        let outcome = runtime.block_on(engine.compactor().compact(session.id())).unwrap();
        if !matches!(outcome, strata_compactor::Outcome::Compacted { pending: true, .. }) {
            break;
        }
    }
    for (category, key, content) in [
        (Category::UserPreferences, "indentation", "Tabs, never spaces."),
        (Category::Progress, "export_fix", "Retries set to 3; verify tonight's run."),
        (Category::Memo, "pool_size", "48 per replica."),
    ] {
        engine
            .store()
            .put_memory(Writer::User, "coder", &MemoryWrite { category, key, title: key, content })
            .unwrap();
    }
    engine
        .store()
        .nodes(session.id())
        .unwrap()
        .iter()
        .filter(|n| n.level == strata::seam::Level::LEAF)
        .count()
}

#[test]
fn export_writes_memory_history_and_one_file_per_root() {
    let strata = Strata::new();
    let leaves = compacted(&strata);
    assert!(leaves >= 4, "the conversation should compact into several leaves: {leaves}");
    let out = strata.dir().join("export");
    let report =
        strata.run(&["export", "--persona", "coder", "--out", out.to_str().unwrap(), "--json"]).json();
    assert_eq!(report["memories"], 3);
    assert_eq!(report["history_entries"], leaves);

    let memory = std::fs::read_to_string(out.join("MEMORY.md")).unwrap();
    for expected in ["## user_preferences", "## progress", "## memo", "Tabs, never spaces."] {
        assert!(memory.contains(expected), "{expected}: {memory}");
    }
    let history = std::fs::read_to_string(out.join("HISTORY.md")).unwrap();
    let entries: Vec<&str> = history.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(entries.len(), leaves);
    for entry in &entries {
        // `[YYYY-MM-DD HH:MM] headline — body`, one grep-able line each.
        assert!(entry.as_bytes()[17] == b']' && entry.contains(" — "), "{entry}");
    }
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    let roots = report["roots"].as_u64().unwrap();
    assert!(roots >= 1);
    assert_eq!(index.matches("](nodes/node-").count() as u64, roots);
    let pages: Vec<_> = std::fs::read_dir(out.join("nodes")).unwrap().collect();
    assert_eq!(pages.len() as u64, roots);
    // Every Level-0 node appears in some root page with its source message ids.
    let all_pages: String =
        pages.into_iter().map(|p| std::fs::read_to_string(p.unwrap().path()).unwrap()).collect();
    assert_eq!(all_pages.matches("Source messages (ids): ").count(), leaves);

    // Another persona exports nothing of coder's.
    let other = strata.dir().join("other");
    let report =
        strata.run(&["export", "--persona", "writer", "--out", other.to_str().unwrap(), "--json"]).json();
    assert_eq!((report["memories"].as_u64(), report["history_entries"].as_u64()), (Some(0), Some(0)));
}

#[test]
fn config_prints_the_effective_settings() {
    let strata = Strata::new();
    let file = strata.file("strata.toml", "[compactor]\ncontext_window_tokens = 64000\n");
    let out = strata
        .command()
        .args(["--config", file.to_str().unwrap(), "config"])
        .env("STRATA_RECALL_DEFAULT_LIMIT", "7")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let config: Config = toml::from_str(&text).unwrap();
    assert_eq!(config.compactor.context_window_tokens, 64_000);
    assert_eq!(config.recall.default_limit, 7);

    let bad = strata.file("bad.toml", "[compactor]\nreserve_tokens = \"lots\"\n");
    let error = strata.run(&["--config", bad.to_str().unwrap(), "config"]).failure();
    assert!(error.contains("reserve_tokens"), "{error}");
}
