//! `strata export`: Markdown for people and for grep, `MEMORY.md`, `HISTORY.md`, and an index
//! with one file per root of the summary forest; or the messages themselves as strata's JSON
//! Lines, which `strata ingest` stores back unchanged.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use strata_seam::fence::one_line;
use strata_seam::{Backend, Category, Session, SummaryNode};

use anyhow::{Context, Result, bail};
use strata_seam::transfer::ExportScope;

use crate::cli::output::print_json;

/// Options of `strata export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// What to write: `markdown` (a directory of MEMORY.md, HISTORY.md and the summary forest)
    /// or `jsonl` (every message, in the format `strata ingest` reads).
    #[arg(long, value_enum, default_value_t = ExportFormat::Markdown)]
    format: ExportFormat,
    /// The persona to export (default "default").
    #[arg(long, conflicts_with = "session")]
    persona: Option<String>,
    /// The session to export (jsonl only).
    #[arg(long)]
    session: Option<String>,
    /// The directory to write into (markdown, created if missing), or the file (jsonl; `-` is
    /// standard output).
    #[arg(long)]
    out: PathBuf,
}

/// The formats of `strata export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// MEMORY.md, HISTORY.md and one file per root of the summary forest.
    Markdown,
    /// strata's JSON Lines, one message per line, every stored field.
    Jsonl,
}

/// Runs `strata export`.
pub fn run(store: &dyn Backend, args: &ExportArgs, json: bool, out: &mut impl std::io::Write) -> Result<()> {
    let persona = args.persona.as_deref().unwrap_or("default");
    match args.format {
        ExportFormat::Markdown => {
            if args.session.is_some() {
                bail!("--session is for --format jsonl; the markdown export is of a whole persona");
            }
            let dir = &args.out;
            let report = export_persona(store, persona, dir)?;
            if json {
                print_json(out, &report)?;
            } else {
                writeln!(
                    out,
                    "wrote {} files to {}: {} memories, {} history entries, {} root nodes",
                    report.files.len(),
                    dir.display(),
                    report.memories,
                    report.history_entries,
                    report.roots
                )?;
            }
        }
        ExportFormat::Jsonl => {
            let scope = match &args.session {
                Some(key) => {
                    if store.find_session(key)?.is_none() {
                        bail!("no session {key:?} in this database");
                    }
                    ExportScope::Session(key)
                }
                None => {
                    strata_seam::backend::validate_persona(persona)?;
                    ExportScope::Persona(persona)
                }
            };
            let messages = store.export_messages(scope)?;
            let sessions = export_jsonl(&messages, &args.out)?;
            // On standard output the messages are the output: no report follows them.
            if args.out.as_os_str() == "-" {
                return Ok(());
            }
            if json {
                print_json(
                    out,
                    &serde_json::json!({"messages": messages.len(), "sessions": sessions, "file": args.out}),
                )?;
            } else {
                writeln!(
                    out,
                    "wrote {} messages of {} session(s) to {}",
                    messages.len(),
                    sessions,
                    args.out.display()
                )?;
            }
        }
    }
    Ok(())
}

/// Writes the messages as JSON Lines to `path` (`-`: standard output); returns how many
/// sessions they belong to. A file is written whole or not at all: into a temporary file
/// beside it, renamed over it at the end.
fn export_jsonl(messages: &[strata_seam::transfer::ExportedMessage], path: &Path) -> Result<usize> {
    let mut sessions = std::collections::BTreeSet::new();
    let mut write_all = |out: &mut dyn std::io::Write| -> std::io::Result<()> {
        for message in messages {
            sessions.insert(message.session_key.as_str());
            out.write_all(strata::import::jsonl::write_line(message).as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    };
    if path.as_os_str() == "-" {
        write_all(&mut std::io::stdout().lock())?;
    } else {
        let cannot = || format!("cannot write {}", path.display());
        let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut file = tempfile::NamedTempFile::new_in(dir).with_context(cannot)?;
        {
            let mut writer = std::io::BufWriter::new(file.as_file_mut());
            write_all(&mut writer).with_context(cannot)?;
        }
        file.persist(path).with_context(cannot)?;
    }
    Ok(sessions.len())
}

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportReport {
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// Memories written to MEMORY.md.
    pub memories: usize,
    /// Level-0 nodes written to HISTORY.md.
    pub history_entries: usize,
    /// Root nodes, one file each.
    pub roots: usize,
}

fn minute(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%d %H:%M").to_string()
}

fn write(dir: &Path, name: &str, contents: &str, report: &mut ExportReport) -> Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, contents).with_context(|| format!("cannot access {}", path.display()))?;
    report.files.push(path);
    Ok(())
}

/// Writes the exports of one persona into `dir` (created if missing).
pub fn export_persona(store: &dyn Backend, persona: &str, dir: &Path) -> Result<ExportReport> {
    strata_seam::backend::validate_persona(persona)?;
    std::fs::create_dir_all(dir.join("nodes")).with_context(|| format!("cannot access {}", dir.display()))?;
    let mut report = ExportReport::default();

    let mut memory_md = format!("# Memory of persona `{persona}`\n");
    for category in Category::ALL {
        let memories = store.memories(persona, Some(category))?;
        if memories.is_empty() {
            continue;
        }
        let _ = write!(memory_md, "\n## {category}\n\n");
        for memory in &memories {
            let _ = writeln!(
                memory_md,
                "- **{}** (`{}`, updated {}): {}",
                memory.title,
                memory.key,
                minute(memory.updated_at),
                one_line(&memory.content)
            );
            report.memories += 1;
        }
    }
    write(dir, "MEMORY.md", &memory_md, &mut report)?;

    let sessions = store.sessions(Some(persona))?;
    let mut forests: Vec<(Session, Vec<SummaryNode>)> = Vec::new();
    for session in sessions {
        let nodes = store.nodes(session.id)?;
        forests.push((session, nodes));
    }

    let mut leaves: Vec<(&Session, &SummaryNode)> = forests
        .iter()
        .flat_map(|(session, nodes)| {
            nodes.iter().filter(|n| n.level == strata_seam::Level::LEAF).map(move |n| (session, n))
        })
        .collect();
    leaves.sort_by_key(|(_, node)| (node.start_time, node.id));
    let mut history = format!("# History of persona `{persona}`\n\n");
    for (session, node) in &leaves {
        let _ = writeln!(
            history,
            "[{}] {} — {} (session {}, node {}, messages {}-{})\n",
            minute(node.start_time),
            one_line(&node.headline),
            one_line(&node.body),
            session.key,
            node.id,
            node.first_seq,
            node.last_seq
        );
    }
    report.history_entries = leaves.len();
    write(dir, "HISTORY.md", &history, &mut report)?;

    let mut index = format!("# Summary forest of persona `{persona}`\n");
    for (session, nodes) in &forests {
        let _ = write!(index, "\n## Session `{}`\n\n", session.key);
        let roots: Vec<&SummaryNode> = nodes.iter().filter(|n| n.parent_id.is_none()).collect();
        if roots.is_empty() {
            index.push_str("(nothing compacted yet)\n");
        }
        let mut roots = roots;
        roots.sort_by_key(|n| n.first_seq);
        for root in roots {
            let name = format!("nodes/node-{}.md", root.id);
            let _ = writeln!(
                index,
                "- [{} → {}] level {} · [{}]({name})",
                minute(root.start_time),
                minute(root.end_time),
                root.level,
                one_line(&root.headline)
            );
            let mut page = String::new();
            render_subtree(store, session, nodes, root, 1, &mut page)?;
            write(dir, &name, &page, &mut report)?;
            report.roots += 1;
        }
    }
    write(dir, "index.md", &index, &mut report)?;
    Ok(report)
}

/// One node and, below it, its descendants, each with an anchor; Level-0 nodes list the ids
/// of their source messages (`strata view ID` shows one).
fn render_subtree(
    store: &dyn Backend,
    session: &Session,
    nodes: &[SummaryNode],
    node: &SummaryNode,
    depth: usize,
    page: &mut String,
) -> Result<()> {
    let heading = "#".repeat(depth.min(6));
    let _ = write!(
        page,
        "{heading} <a id=\"node-{id}\"></a>Node {id} · level {level} · session `{session}` · messages {first}-{last}\n\n\
         {start} → {end} · {tokens} tokens summarizing {source} · by {by}\n\n**{headline}**\n\n{body}\n\n",
        id = node.id,
        level = node.level,
        session = session.key,
        first = node.first_seq,
        last = node.last_seq,
        start = minute(node.start_time),
        end = minute(node.end_time),
        tokens = node.token_count,
        source = node.source_token_count,
        by = node.summarizer,
        headline = node.headline.trim(),
        body = node.body.trim(),
    );
    let mut children: Vec<&SummaryNode> = nodes.iter().filter(|n| n.parent_id == Some(node.id)).collect();
    children.sort_by_key(|n| n.first_seq);
    if children.is_empty() {
        let ids: Vec<String> = store.covered_messages(node.id)?.iter().map(|m| m.id.to_string()).collect();
        let _ = write!(page, "Source messages (ids): {}\n\n", ids.join(", "));
        return Ok(());
    }
    let links: Vec<String> = children.iter().map(|c| format!("[node {}](#node-{})", c.id, c.id)).collect();
    let _ = write!(page, "Children: {}\n\n", links.join(", "));
    for child in children {
        render_subtree(store, session, nodes, child, depth + 1, page)?;
    }
    Ok(())
}
