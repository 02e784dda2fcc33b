//! The configuration file and the environment: `Config::load` (feature `config-file`).

use std::path::Path;

use crate::config::Config;
use crate::error::{Error, Result};

/// The commented example file; its values are the defaults.
pub const EXAMPLE: &str = include_str!("../../strata.example.toml");

impl Config {
    /// Loads the configuration: the embedded defaults, then `file` (if given), then
    /// `STRATA_<SECTION>_<KEY>` variables from `env`. Unknown keys and bad values are errors
    /// naming the key.
    pub fn load(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config> {
        let mut table: toml::Table =
            toml::from_str(EXAMPLE).map_err(|e| Error::Config(format!("built-in defaults: {e}")))?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
            let overlay: toml::Table = toml::from_str(&text)
                .map_err(|e| Error::Config(format!("{}: {}", path.display(), e.message())))?;
            merge(&mut table, overlay);
        }
        let env: Vec<(String, String)> =
            env.into_iter().filter(|(key, _)| key.starts_with("STRATA_")).collect();
        apply_env(&mut table, &env);
        // Round-trip through text so a bad value's error can name the line it sits on.
        let text = toml::to_string(&table).map_err(|e| Error::Config(e.to_string()))?;
        let config: Config = toml::from_str(&text).map_err(|e| Error::Config(describe(&e, &text)))?;
        config.validate()?;
        Ok(config)
    }

    /// The effective configuration as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render: {e}"))
    }
}

/// The error's message with the setting it is about: `... (at [compactor] tail_turns = "many")`.
fn describe(error: &toml::de::Error, text: &str) -> String {
    let Some(span) = error.span() else { return error.message().to_owned() };
    let before = &text[..span.start.min(text.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
    let section = before.lines().rev().find(|line| line.trim_start().starts_with('[')).unwrap_or("").trim();
    format!("{} (at {section} {})", error.message(), text[line_start..line_end].trim())
}

fn merge(base: &mut toml::Table, overlay: toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(overlay)) => merge(inner, overlay),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets every leaf `a.b.c` that has a `STRATA_A_B_C` variable. Optional settings absent from
/// the defaults are reachable as well through the keys listed in [`OPTIONAL_KEYS`].
fn apply_env(table: &mut toml::Table, env: &[(String, String)]) {
    let mut paths = Vec::new();
    collect_paths(table, &mut Vec::new(), &mut paths);
    paths.extend(OPTIONAL_KEYS.iter().map(|path| path.iter().map(|s| (*s).to_owned()).collect()));
    for path in paths {
        let name = format!("STRATA_{}", path.join("_").to_ascii_uppercase());
        if let Some((_, raw)) = env.iter().find(|(key, _)| *key == name) {
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(raw.clone()));
            set(table, &path, value);
        }
    }
}

/// Settings that have no default value, so they are not in the example file's active lines.
const OPTIONAL_KEYS: &[&[&str]] = &[&["compactor", "encoding"], &["recall", "embed_assets"]];

fn collect_paths(table: &toml::Table, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in table {
        prefix.push(key.clone());
        match value {
            toml::Value::Table(inner) => collect_paths(inner, prefix, out),
            _ => out.push(prefix.clone()),
        }
        prefix.pop();
    }
}

fn set(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let (last, parents) = path.split_last().expect("paths are never empty");
    let mut current = table;
    for key in parents {
        current = match current.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
            toml::Value::Table(inner) => inner,
            _ => return,
        };
    }
    current.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_is_exactly_the_defaults() {
        let parsed: Config = toml::from_str(EXAMPLE).unwrap();
        assert_eq!(parsed, Config::default());
        assert_eq!(Config::load(None, []).unwrap(), Config::default());
    }

    #[test]
    fn example_file_names_every_setting() {
        let example: toml::Table = toml::from_str(EXAMPLE).unwrap();
        let defaults = toml::Table::try_from(Config::default()).unwrap();
        let (mut in_example, mut in_defaults) = (Vec::new(), Vec::new());
        collect_paths(&example, &mut Vec::new(), &mut in_example);
        collect_paths(&defaults, &mut Vec::new(), &mut in_defaults);
        // Settings without a default (None) are absent from both; they are commented in the
        // example and reachable from the environment through OPTIONAL_KEYS.
        for path in in_defaults {
            assert!(in_example.contains(&path), "strata.example.toml lacks {}", path.join("."));
        }
        for optional in OPTIONAL_KEYS {
            assert!(EXAMPLE.contains(&format!("# {} = ", optional[optional.len() - 1])), "{optional:?}");
        }
    }

    #[test]
    fn file_then_env_override_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "[compactor]\ncontext_window_tokens = 64000\ntail_turns = 6\n").unwrap();
        let env = [
            ("STRATA_COMPACTOR_TAIL_TURNS".to_owned(), "9".to_owned()),
            ("STRATA_SUMMARIZER_MODEL".to_owned(), "llama3.1:8b".to_owned()),
            ("STRATA_RECALL_EMBED_ASSETS".to_owned(), "/opt/assets".to_owned()),
            ("UNRELATED".to_owned(), "x".to_owned()),
        ];
        let config = Config::load(Some(&path), env).unwrap();
        assert_eq!(config.compactor.context_window_tokens, 64_000);
        assert_eq!(config.compactor.tail_turns, 9, "env beats the file");
        assert_eq!(config.summarizer.model, "llama3.1:8b", "plain strings need no quotes");
        assert_eq!(config.recall.embed_assets.as_deref(), Some(Path::new("/opt/assets")));
    }

    #[test]
    fn mistakes_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("strata.toml");
        std::fs::write(&path, "[compactor]\ncontext_window_tokns = 1\n").unwrap();
        let err = Config::load(Some(&path), []).unwrap_err().to_string();
        assert!(err.contains("context_window_tokns"), "{err}");
        let err =
            Config::load(None, [("STRATA_COMPACTOR_RESERVE_TOKENS".into(), "99999".into())]).unwrap_err();
        assert!(err.to_string().contains("reserve_tokens"), "{err}");
        for (key, value) in [
            ("STRATA_RECALL_SEMANTIC_WEIGHT", "nan"),
            ("STRATA_RECALL_EMBED_MAX_CHUNKS", "0"),
            ("STRATA_RECALL_EMBED_MODEL", "\"word2vec\""),
            ("STRATA_RECALL_MIN_SIMILARITY", "7.0"),
            ("STRATA_RECALL_MEMORY_TTLS_USER_PREFERENCES", "4000000000"),
        ] {
            let err = Config::load(None, [(key.into(), value.into())]).unwrap_err().to_string();
            let setting = key.trim_start_matches("STRATA_RECALL_").to_ascii_lowercase();
            assert!(err.contains(&setting.replace("memory_ttls_", "memory_ttls.")), "{key}: {err}");
        }
        let err = Config::load(None, [("STRATA_COMPACTOR_TAIL_TURNS".into(), "many".into())]).unwrap_err();
        assert!(err.to_string().contains("[compactor] tail_turns = \"many\""), "{err}");
    }
}
