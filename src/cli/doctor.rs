//! `strata doctor`, `strata backup` and `strata copy`: is the database healthy, a consistent
//! copy of the file, and the file moved into PostgreSQL.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use strata_store::{Backend, Store};

use crate::cli::output::print_json;

/// Runs every check; a readable report, and an error (so a non-zero exit) when one failed.
pub fn doctor(store: &dyn Backend, full: bool, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let report = store.doctor(full).context("the checks could not run")?;
    if json {
        print_json(out, &report)?;
    } else {
        for check in &report.checks {
            let verdict = match (&check.skipped, check.problems) {
                (Some(_), _) => "not run".to_owned(),
                (None, 0) => "ok".to_owned(),
                (None, problems) => format!("{problems} problems"),
            };
            writeln!(out, "{verdict:>12}  {}", check.name)?;
            if let Some(why) = &check.skipped {
                writeln!(out, "              - {why}")?;
            }
            for detail in &check.details {
                writeln!(out, "              - {detail}")?;
            }
        }
        writeln!(
            out,
            "{:>12}  rows waiting for a vector (`strata embed` catches up)",
            report.embedding_backlog
        )?;
    }
    if !report.healthy() {
        let failed: Vec<&str> =
            report.checks.iter().filter(|check| check.problems > 0).map(|check| check.name).collect();
        bail!("the database is not healthy: {}", failed.join("; "));
    }
    Ok(())
}

/// Writes a consistent copy of the database to `dest` and checks the copy.
pub fn backup(store: &Store, dest: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    store.backup(dest).with_context(|| format!("cannot back up to {}", dest.display()))?;
    let copy = Store::open_existing(dest, std::time::Duration::from_secs(10))
        .with_context(|| format!("the backup at {} cannot be opened", dest.display()))?;
    copy.quick_check().with_context(|| format!("the backup at {} is damaged", dest.display()))?;
    let stats = copy.stats()?;
    if json {
        print_json(
            out,
            &serde_json::json!({"backup": dest, "messages": stats.messages, "bytes": stats.file_bytes}),
        )?;
    } else {
        writeln!(
            out,
            "backed up {} to {} ({} messages, {} bytes, checked)",
            store.path().display(),
            dest.display(),
            stats.messages,
            stats.file_bytes
        )?;
    }
    Ok(())
}

/// Copies the SQLite database into the PostgreSQL database at `to`, then checks the copy: the
/// same counts as the file, and every check of `doctor` passing.
pub fn copy(store: &Store, to: &str, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let target = strata_pg::PgStore::open(to).context("cannot use the PostgreSQL database")?;
    let name = store.path().canonicalize().unwrap_or_else(|_| store.path().to_path_buf());
    let progress = indicatif::ProgressBar::new_spinner();
    let copied = target
        .copy_from(store, &name.display().to_string(), |table, rows| {
            progress.set_message(format!("{table}: {rows}"));
            progress.tick();
        })
        .context("the copy stopped; run the same command again to finish it")?;
    progress.finish_and_clear();
    let (source, copy) = (store.stats()?, target.stats()?);
    let report = target.doctor(false).context("the copy's checks could not run")?;
    let same =
        (
            source.sessions,
            source.messages,
            source.compacted_messages,
            source.memories,
            source.embedding_backlog,
        ) == (copy.sessions, copy.messages, copy.compacted_messages, copy.memories, copy.embedding_backlog)
            && source.nodes_per_level == copy.nodes_per_level;
    if json {
        print_json(
            out,
            &serde_json::json!({
                "sessions": copied.sessions, "messages": copied.messages, "nodes": copied.nodes,
                "memories": copied.memories, "queued": copied.queued, "vectors": copied.vectors,
                "backlog": copied.backlog, "same_counts": same, "healthy": report.healthy(),
            }),
        )?;
    } else {
        writeln!(
            out,
            "copied {} sessions, {} messages, {} summary nodes, {} memories, {} queued facts, {} vectors \
             ({} rows wait for a vector)",
            copied.sessions,
            copied.messages,
            copied.nodes,
            copied.memories,
            copied.queued,
            copied.vectors,
            copied.backlog
        )?;
    }
    if !same {
        bail!("the copy's counts differ from the file's: {source:?} against {copy:?}");
    }
    if !report.healthy() {
        let failed: Vec<&str> =
            report.checks.iter().filter(|check| check.problems > 0).map(|check| check.name).collect();
        bail!("the copy is not healthy: {}", failed.join("; "));
    }
    Ok(())
}
