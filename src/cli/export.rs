//! `strata export`: Markdown for people and for grep, `MEMORY.md`, `HISTORY.md`, and an index
//! with one file per root of the summary forest.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use strata_store::fence::one_line;
use strata_store::{Category, Session, Store, SummaryNode};

use anyhow::{Context, Result};

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
pub fn export_persona(store: &Store, persona: &str, dir: &Path) -> Result<ExportReport> {
    strata_store::validate_persona(persona)?;
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
            nodes.iter().filter(|n| n.level == strata_store::Level::LEAF).map(move |n| (session, n))
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
    store: &Store,
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
