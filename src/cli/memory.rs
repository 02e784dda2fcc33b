//! `strata memory`: the user's side of agent memories.

use std::io::Write;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use clap::Subcommand;
use strata::edge;
use strata_seam::memories::{MemoryWrite, Provenance, Writer, normalize_key};
use strata_seam::{Backend, Category, Memory};

use crate::cli::output::print_json;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Write a memory (any category, user_preferences included).
    Set {
        /// progress, user_preferences or memo.
        category: Category,
        /// Key; normalized to snake_case.
        key: String,
        /// Markdown or JSON, at most 500 characters.
        content: String,
        /// Human-readable label (defaults to the key).
        #[arg(long)]
        title: Option<String>,
        /// The persona it belongs to.
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Show one memory.
    Get {
        category: Category,
        key: String,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// List memories of a persona.
    List {
        /// Only this category.
        #[arg(long)]
        category: Option<Category>,
        /// The memories as they were at this time (RFC 3339, or a date for its start in UTC):
        /// each one's text true then, superseded ones included.
        #[arg(long)]
        as_of: Option<String>,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// A memory stopped being true: its text stays in the history, dated, and CONTENT (if
    /// given) is true from then on; without CONTENT the memory stays, ended.
    Supersede {
        category: Category,
        key: String,
        /// What is true from `--at` on.
        content: Option<String>,
        /// When the old text stopped being true (RFC 3339, or a date for its start in UTC);
        /// default now.
        #[arg(long)]
        at: Option<String>,
        /// The new text's label (defaults to the memory's).
        #[arg(long)]
        title: Option<String>,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Two memories of one meaning under two keys become one: KEY ends now (its text stays in
    /// the history, dated) and INTO takes CONTENT, or, without it, its own text followed by
    /// KEY's. Both happen or neither. The kept memory's history names the merge when its text
    /// changed; KEY's history keeps its last text with the date it ended.
    Merge {
        category: Category,
        /// The memory that ends.
        key: String,
        /// The memory that stays (of the same category unless --into-category says another).
        into: String,
        #[arg(long)]
        into_category: Option<Category>,
        /// The merged memory's text (default: INTO's text, then KEY's unless INTO holds it).
        #[arg(long)]
        content: Option<String>,
        /// The merged memory's label (defaults to INTO's).
        #[arg(long)]
        title: Option<String>,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Pairs of live memories that look like one memory under two keys (by spelling, and by
    /// meaning in any script when the embedding model loads), each with the merge command
    /// that would make them one.
    Twins {
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Every version of a memory, newest first, with where each came from.
    History {
        key: String,
        /// Its category, when the key exists in several.
        #[arg(long)]
        category: Option<Category>,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Delete expired memories (per-category time-to-live: `recall.memory_ttls` in the config).
    Purge,
    /// List the preferences the summaries found in the chat, waiting for your yes or no.
    Proposals {
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Accept a proposed preference: it becomes your user_preferences memory.
    Accept {
        key: String,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Reject a proposed preference: it is deleted.
    Reject {
        key: String,
        #[arg(long, default_value = "default")]
        persona: String,
    },
    /// Delete a memory.
    Delete {
        category: Category,
        key: String,
        #[arg(long, default_value = "default")]
        persona: String,
    },
}

impl MemoryCommand {
    /// Whether the command only reads, so it opens an existing database and never creates one.
    pub fn reads_only(&self) -> bool {
        matches!(
            self,
            MemoryCommand::Get { .. }
                | MemoryCommand::List { .. }
                | MemoryCommand::Proposals { .. }
                | MemoryCommand::History { .. }
                | MemoryCommand::Twins { .. }
        )
    }
}

fn key_of(raw: &str) -> anyhow::Result<String> {
    normalize_key(raw).with_context(|| format!("key {raw:?} has no letters or digits"))
}

fn print_memory(out: &mut impl Write, memory: &Memory) -> anyhow::Result<()> {
    writeln!(
        out,
        "[{}] {} — {} (updated {}; {})\n  {}",
        memory.category,
        memory.key,
        memory.title,
        memory.updated_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        validity(memory.valid_from, memory.valid_to),
        memory.content.replace('\n', "\n  ")
    )?;
    if let Some(provenance) = &memory.provenance {
        writeln!(out, "  from: {}", source_line(provenance))?;
    }
    Ok(())
}

/// `true since 2026-03-01T00:00:00Z`, with `until ...` once it stopped being true.
fn validity(from: DateTime<Utc>, to: Option<DateTime<Utc>>) -> String {
    let mut text = format!("true since {}", from.to_rfc3339_opts(SecondsFormat::Secs, true));
    if let Some(to) = to {
        text.push_str(&format!(" until {}", to.to_rfc3339_opts(SecondsFormat::Secs, true)));
    }
    text
}

/// A time argument, by the tools' one rule (RFC 3339, or a date for its start in UTC).
fn time_of(field: &'static str, text: &str) -> anyhow::Result<DateTime<Utc>> {
    Ok(strata_recall::parse_bound(field, text, strata_recall::Bound::Start)?)
}

/// Where a memory came from, in one line: `user via strata memory set`, `summary node 12
/// (session 3, messages 40-57)`, `agent via save_memory (session 3, message 812, call c1)`.
pub fn source_line(provenance: &Provenance) -> String {
    let source = serde_json::to_value(provenance.source).ok();
    let mut line = source.as_ref().and_then(|v| v.as_str()).unwrap_or("unknown").to_owned();
    if let Some(node) = provenance.node {
        line.push_str(&format!(" node {node}"));
    }
    if let Some(via) = &provenance.via {
        line.push_str(&format!(" via {via}"));
    }
    let mut place = Vec::new();
    if let Some(session) = provenance.session {
        place.push(format!("session {session}"));
    }
    if let (Some(first), Some(last)) = (provenance.first_seq, provenance.last_seq) {
        place.push(format!("messages seq {first}-{last}"));
    }
    if let Some(message) = provenance.message {
        place.push(format!("message {message}"));
    }
    if let Some(call) = &provenance.tool_call_id {
        place.push(format!("call {call}"));
    }
    if !place.is_empty() {
        line.push_str(&format!(" ({})", place.join(", ")));
    }
    line
}

pub fn run(
    store: &dyn Backend,
    recall: &strata_recall::RecallConfig,
    retry: &strata::llm::RetryPolicy,
    command: &MemoryCommand,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match command {
        MemoryCommand::Set { category, key, content, title, persona } => {
            let key = key_of(key)?;
            let title = title.as_deref().unwrap_or(&key);
            let (memory, _) = store.save_memory(
                Writer::User,
                persona,
                &MemoryWrite { category: *category, key: &key, title, content },
                &Provenance::user("strata memory set"),
            )?;
            if json {
                print_json(out, &edge::Memory::from(&memory))?;
            } else {
                writeln!(out, "saved {} {} for persona {}", memory.category, memory.key, memory.persona)?;
            }
        }
        MemoryCommand::Get { category, key, persona } => {
            let key = key_of(key)?;
            let memory = store
                .memory(persona, *category, &key)?
                .with_context(|| format!("no {category} memory {key:?} for persona {persona:?}"))?;
            if json {
                print_json(out, &edge::Memory::from(&memory))?;
            } else {
                print_memory(out, &memory)?;
            }
        }
        MemoryCommand::Supersede { category, key, content, at, title, persona } => {
            let key = key_of(key)?;
            let at = match at {
                Some(text) => time_of("at", text)?,
                None => Utc::now(),
            };
            let current = store
                .memory(persona, *category, &key)?
                .with_context(|| format!("no {category} memory {key:?} for persona {persona:?}"))?;
            let title = title.as_deref().unwrap_or(&current.title);
            let with = content.as_deref().map(|content| MemoryWrite {
                category: *category,
                key: &key,
                title,
                content,
            });
            let memory = store.supersede_memory(
                Writer::User,
                persona,
                *category,
                &key,
                with.as_ref(),
                at,
                &Provenance::user("strata memory supersede"),
            )?;
            if json {
                print_json(out, &edge::Memory::from(&memory))?;
            } else {
                print_memory(out, &memory)?;
            }
        }
        MemoryCommand::List { category, as_of, persona } => {
            let memories = match as_of {
                Some(text) => store.memories_as_of(persona, *category, time_of("as_of", text)?)?,
                None => store.memories(persona, *category)?,
            };
            if json {
                print_json(out, &edge::all::<_, edge::Memory>(&memories))?;
            } else if memories.is_empty() {
                writeln!(out, "no memories for persona {persona}")?;
            } else {
                for memory in &memories {
                    print_memory(out, memory)?;
                }
            }
        }
        MemoryCommand::Merge { category, key, into, into_category, content, title, persona } => {
            let (key, into) = (key_of(key)?, key_of(into)?);
            let into_category = into_category.unwrap_or(*category);
            let missing = |category: Category, key: &str| {
                format!("no {category} memory {key:?} for persona {persona:?}")
            };
            let merged = store.memory(persona, *category, &key)?.with_context(|| missing(*category, &key))?;
            let kept = store
                .memory(persona, into_category, &into)?
                .with_context(|| missing(into_category, &into))?;
            let content = match content {
                Some(content) => content.clone(),
                None if kept.content.contains(merged.content.trim()) => kept.content.clone(),
                None => format!("{} {}", kept.content.trim_end(), merged.content.trim()),
            };
            let via = format!("strata memory merge {category}/{key} into {into_category}/{into}");
            let memory = store.merge_memory(
                persona,
                *category,
                &key,
                &MemoryWrite {
                    category: into_category,
                    key: &into,
                    title: title.as_deref().unwrap_or(&kept.title),
                    content: &content,
                },
                &Provenance::user(via),
            )?;
            if json {
                print_json(out, &edge::Memory::from(&memory))?;
            } else {
                writeln!(out, "merged {category} {key} into {} {}", memory.category, memory.key)?;
                print_memory(out, &memory)?;
            }
        }
        MemoryCommand::Twins { persona } => {
            // Without the model the check is the one a new key meets without it: spelling.
            let embedder = match strata::load_embedder(recall, retry) {
                Ok(embedder) => Some(embedder),
                Err(e) => {
                    tracing::warn!("twins by spelling only: the embedding model did not load: {e}");
                    None
                }
            };
            let twins = strata_recall::twins(store, persona, recall, embedder.as_ref())?;
            if json {
                print_json(out, &serde_json::json!({"twins": twins, "spelling_only": embedder.is_none()}))?;
            } else {
                for group in &twins {
                    let kept = &group.kept;
                    writeln!(out, "{}/{}: {}", kept.category, kept.key, kept.title)?;
                    for twin in &group.twins {
                        let memory = &twin.memory;
                        let into_category = if kept.category == memory.category {
                            String::new()
                        } else {
                            format!(" --into-category {}", kept.category)
                        };
                        writeln!(
                            out,
                            "  {}/{}, a twin of {} {}: strata memory merge {} {} {}{into_category} --persona {persona}",
                            memory.category,
                            memory.key,
                            twin.of,
                            twin.likeness,
                            memory.category,
                            memory.key,
                            kept.key,
                        )?;
                    }
                }
                let how = if embedder.is_some() { "by spelling and meaning" } else { "by spelling only" };
                writeln!(out, "{} groups of twins, checked {how}", twins.len())?;
            }
        }
        MemoryCommand::History { key, category, persona } => {
            let key = key_of(key)?;
            let categories: Vec<Category> = match category {
                Some(category) => vec![*category],
                None => store
                    .memories(persona, None)?
                    .into_iter()
                    .filter(|memory| memory.key == key)
                    .map(|memory| memory.category)
                    .collect(),
            };
            let category = match categories.as_slice() {
                [one] => *one,
                [] => anyhow::bail!("no memory {key:?} for persona {persona:?}"),
                _ => anyhow::bail!("{key:?} is a key of several categories; name one with --category"),
            };
            let versions = store.memory_history(persona, category, &key)?;
            if versions.is_empty() {
                anyhow::bail!("no {category} memory {key:?} for persona {persona:?}");
            }
            if json {
                print_json(out, &edge::all::<_, edge::MemoryVersion>(&versions))?;
            } else {
                for version in &versions {
                    let when = version.written_at.to_rfc3339_opts(SecondsFormat::Secs, true);
                    let state = match version.replaced_at {
                        None => "current".to_owned(),
                        Some(at) => format!("replaced {}", at.to_rfc3339_opts(SecondsFormat::Secs, true)),
                    };
                    let state = format!("{state}; {}", validity(version.valid_from, version.valid_to));
                    writeln!(
                        out,
                        "{when} ({state}) {} — from: {}\n  {}",
                        version.title,
                        source_line(&version.provenance),
                        version.content.replace('\n', "\n  ")
                    )?;
                }
            }
        }
        MemoryCommand::Delete { category, key, persona } => {
            let key = key_of(key)?;
            if !store.delete_memory(Writer::User, persona, *category, &key)? {
                anyhow::bail!("no {category} memory {key:?} for persona {persona:?}");
            }
            writeln!(out, "deleted {category} {key}")?;
        }
        MemoryCommand::Purge => crate::cli::recall::purge(store, recall, json, out)?,
        MemoryCommand::Proposals { persona } => {
            let proposals = store.proposals(persona)?;
            if json {
                print_json(out, &edge::all::<_, edge::Proposal>(&proposals))?;
            } else if proposals.is_empty() {
                writeln!(out, "no proposed preferences for persona {persona}")?;
            } else {
                for proposal in &proposals {
                    let update = &proposal.update;
                    writeln!(
                        out,
                        "{} — {} (found {}{})\n  {}",
                        update.key,
                        update.title,
                        proposal.created_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                        proposal.node_id.map(|node| format!(" in node {node}")).unwrap_or_default(),
                        update.content.replace('\n', "\n  ")
                    )?;
                }
                writeln!(
                    out,
                    "accept with `strata memory accept KEY`, reject with `strata memory reject KEY`"
                )?;
            }
        }
        MemoryCommand::Accept { key, persona } => {
            let memory = store.accept_proposal(persona, &key_of(key)?)?;
            if json {
                print_json(out, &edge::Memory::from(&memory))?;
            } else {
                writeln!(out, "accepted: user_preferences {} for persona {}", memory.key, memory.persona)?;
            }
        }
        MemoryCommand::Reject { key, persona } => {
            let proposal = store.reject_proposal(persona, &key_of(key)?)?;
            if json {
                print_json(out, &edge::Proposal::from(&proposal))?;
            } else {
                writeln!(out, "rejected: {}", proposal.update.key)?;
            }
        }
    }
    Ok(())
}
